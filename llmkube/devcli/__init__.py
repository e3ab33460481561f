"""The developer's commands: `llmkube cluster` (a local control plane) and `llmkube run` (the
controller, with a local cluster when none is given). They run from a checkout: the local clusters
are test tooling (`llmkube_testing`, in tests/support), which neither the wheel nor the image carries."""

import argparse

from llmkube.process.flags import add_controller_flags


def add_developer_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from llmkube.devcli.cluster import run_cluster
    from llmkube.devcli.run import run_local

    cluster = sub.add_parser("cluster", help="start a local control plane (until Ctrl-C)")
    cluster.add_argument(
        "--tier",
        choices=["api", "full"],
        default="full",
        help="api: etcd and kube-apiserver; full: everything",
    )
    cluster.add_argument("--sample", action="store_true", help="also apply the CPU llama.cpp sample")
    _add_keep_logs(cluster)
    cluster.set_defaults(func=run_cluster)

    run = sub.add_parser("run", help="run the controller; starts a local cluster when none is configured")
    add_controller_flags(run)
    run.set_defaults(func=run_local, starts_controller=True)
    run.add_argument(
        "--tier",
        choices=["auto", "node", "full"],
        default="auto",
        help="local cluster without a kubeconfig: a real node where possible (auto), or kwok (full)",
    )
    run.add_argument("--serve-port", type=int, default=18080, help="loopback port for the real node's sample")
    run.add_argument(
        "--with-agent",
        action="store_true",
        help="on the real node, also a metal sample served by a host agent on this machine "
        "(`llmkube agent`, beside the kubelet), answering on --serve-port + 1",
    )
    _add_keep_logs(run)


def _add_keep_logs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep the local cluster's directory (component logs, etcd data, PKI) after a clean stop; "
        "it is kept without asking when the run fails, and stderr says where",
    )
