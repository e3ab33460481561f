"""`llmkube run`: the controller, against the configured cluster or, with none, a local one it
starts first (a real node serving a tiny llama.cpp model where the machine allows: root on Linux;
else kwok). A developer's command, like `llmkube cluster`."""

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from llmkube.devcli.cluster import (
    ensure_binaries,
    install_basics,
    keep_logs,
    require_testing_extra,
    where_logs_go,
)
from llmkube.process.command import run_controller
from llmkube.process.flags import DEFAULT_HEALTH_ADDRESS, DEFAULT_METRICS_ADDRESS

if TYPE_CHECKING:  # the testing extra is imported only when a local cluster is started
    from llmkube_testing.cluster import LocalCluster
    from llmkube_testing.metal_demo import MetalDemo
    from llmkube_testing.node import NodeCluster


def run_local(args: argparse.Namespace) -> int:
    _local_roots_for_run(args)
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG")
    if kubeconfig or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return run_controller(args)
    require_testing_extra("run")
    from llmkube_testing.cluster import LocalCluster
    from llmkube_testing.real_run import choose_run_tier

    tier, why = choose_run_tier(args.tier)
    print(f"llmkube run: using {why}", file=sys.stderr, flush=True)
    if args.with_agent and tier != "node":
        print(
            "llmkube run: --with-agent needs the real node (its kube-proxy routes the metal sample's "
            "ClusterIP to the agent, and its llama.cpp image gives the agent llama-server); "
            "the kwok tier has neither",
            file=sys.stderr,
            flush=True,
        )
        return 2
    if tier == "node":
        return _run_on_node(args)

    ensure_binaries("full")
    with LocalCluster("full", keep_workdir=keep_logs(args)) as cluster:
        install_basics(cluster.kubeconfig, with_sample=True)
        print(
            f"local control plane ready in {cluster.startup_seconds.get('full', 0):.1f}s "
            f"(3 kwok nodes, 3 fake GPUs); sample Model + InferenceService applied.\n"
            f"  export KUBECONFIG={cluster.kubeconfig}\n"
            f"  kubectl get isvc,mdl -o wide\n"
            f"component logs: {cluster.logs_dir} ({where_logs_go(cluster.keep_workdir)})",
            flush=True,
        )
        args.kubeconfig = str(cluster.kubeconfig)
        # The components run in their own session, so a terminal's Ctrl-C reaches only this
        # process: the controller stops first, then the `with` block stops the control plane.
        return _failed_unless_zero(cluster, run_controller(_loopback_endpoints(args)))


def _failed_unless_zero(cluster: "LocalCluster", code: int) -> int:
    """A controller that exited with an error failed the run: the cluster's logs are kept."""
    if code != 0:
        cluster.failed(f"the controller exited with {code}")
    return code


def _loopback_endpoints(args: argparse.Namespace) -> argparse.Namespace:
    """A local try-out must not fight other programs for :8080/:8081: unless told otherwise,
    /metrics and /healthz listen on free loopback ports (logged as "listening")."""
    if args.metrics_bind_address == DEFAULT_METRICS_ADDRESS:
        args.metrics_bind_address = "127.0.0.1:0"
    if args.health_probe_bind_address == DEFAULT_HEALTH_ADDRESS:
        args.health_probe_bind_address = "127.0.0.1:0"
    return args


def _local_roots_for_run(args: argparse.Namespace) -> None:
    """`llmkube run` is a developer's own controller: unless told otherwise it may read local
    models from the developer's home directory (in a cluster, local sources stay disabled)."""
    if args.model_local_roots is None:
        args.model_local_roots = str(Path.home())


def _run_on_node(args: argparse.Namespace) -> int:
    from llmkube_testing.node import NodeCluster
    from llmkube_testing.real_run import ROUTER_IMAGE, ROUTER_SAMPLE, SAMPLE_NAME, TinyDemo

    with NodeCluster(keep_workdir=keep_logs(args)) as cluster:
        install_basics(cluster.kubeconfig, with_sample=False)
        demo = TinyDemo(cluster, serve_port=args.serve_port).start()
        print(
            f"real node ready in {cluster.startup_seconds.get('node', 0):.1f}s; the tiny llama.cpp sample "
            f"({SAMPLE_NAME}: Model + InferenceService, and a pod serving its GGUF) is applied.\n"
            f"  export KUBECONFIG={cluster.kubeconfig}\n"
            f"  {cluster.kubectl} get isvc,mdl,pods -o wide\n"
            f"  {SAMPLE_NAME} will answer on {demo.url} (a line with curl follows once it is Ready)\n"
            f"  {ROUTER_SAMPLE} (a ModelRouter in front of it) will answer on {demo.router_url}\n"
            f"component logs: {cluster.logs_dir} ({where_logs_go(cluster.keep_workdir)})",
            flush=True,
        )
        metal = _metal_demo(args, cluster, demo.model_host)
        # The controller runs in this thread: inside the node's network, like an in-cluster one, so
        # it reaches in-cluster URLs (the Model's source). The loopback forwards were opened before.
        cluster.network.enter_current_thread()
        demo.announce_when_ready()
        demo.announce_router_when_ready()
        if metal is not None:
            metal.announce_when_ready()
        args.kubeconfig = str(cluster.kubeconfig)
        # The router's pods: the controller image the node imported, unless told otherwise.
        args.router_image = args.router_image or ROUTER_IMAGE
        # The sample's model server is a Service of the cluster, which is refused unless allowed.
        args.model_source_allowed_hosts = ",".join(
            filter(None, (args.model_source_allowed_hosts, demo.model_host))
        )
        try:
            return _failed_unless_zero(cluster, run_controller(_loopback_endpoints(args)))
        finally:
            if metal is not None:
                metal.stop()


def _metal_demo(args: argparse.Namespace, cluster: "NodeCluster", model_host: str) -> "MetalDemo | None":
    """With --with-agent: the metal sample and a host agent on this machine that serves it."""
    if not args.with_agent:
        return None
    from llmkube_testing.metal_demo import METAL_SAMPLE, MetalDemo

    metal = MetalDemo(cluster, model_host, serve_port=args.serve_port + 1).start()
    print(
        f"  {METAL_SAMPLE} (a metal Model + InferenceService) is served by a host agent on this machine;"
        f" it will answer on {metal.url}",
        flush=True,
    )
    return metal
