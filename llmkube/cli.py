"""`llmkube`: the controller process and the developer tools around it.

llmkube run          the controller; without a cluster it starts a local one first (a real node
                     serving a tiny llama.cpp model where it can: root on Linux; else kwok)
llmkube controller   the controller against $KUBECONFIG / --kubeconfig / in-cluster config
llmkube cluster      a local control plane only (for kubectl and tests)
llmkube crds         print the CustomResourceDefinitions
llmkube version      print the version

and the commands for users (llmkube/usercli): deploy, list, status, queue, scale, delete, logs,
chat, curl.
"""

import argparse
import gc
import importlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from llmkube import __version__
from llmkube.bundled import MissingBundledFile, bundled_path, manifest_documents
from llmkube.controllers.worker_counts import DEFAULT_WORKERS, MAX_MODEL_WORKERS, model_workers_for

T = TypeVar("T")

if TYPE_CHECKING:
    from llmkube.controllers.setup import ControllersConfig
    from llmkube.manager import ManagerConfig
    from llmkube.plan.model.egress import EgressConfig
    from llmkube.plan.tenancy import TenancyPolicy

BUILD_SCRIPT = "hack/build-k8s.sh"
SAMPLE = "samples/cpu-llamacpp.yaml"
DEFAULT_METRICS_ADDRESS, DEFAULT_HEALTH_ADDRESS = ":8080", ":8081"
#: What a local cluster gets before the controller starts. No PriorityClasses: `llmkube run`'s
#: controller owns them (--manage-priority-classes, the default), so nobody else writes them.
LOCAL_INSTALL = ("manager/namespace.yaml", "rbac", "rbac/priorityclass-writer")


def _print_crds(_: argparse.Namespace) -> int:
    from llmkube.api.crds import all_crds
    from llmkube.api.manifests import to_yaml

    sys.stdout.write(to_yaml(all_crds()))
    return 0


def _print_version(_: argparse.Namespace) -> int:
    print(f"llmkube {__version__}")
    return 0


def _require_testing_extra(command: str) -> None:
    """A local cluster (certificates, a tiny GGUF model) needs the `testing` extra, which the
    controller image leaves out: say so rather than fail on an import deep inside."""
    try:
        import cryptography  # noqa: F401
        import gguf  # noqa: F401
    except ImportError as missing:
        raise SystemExit(
            f"llmkube {command}: a local cluster needs the 'testing' extra ({missing.name} is not "
            "installed): pip install 'llmkube[testing]'"
        ) from None


def _ensure_binaries(tier: str) -> Path:
    from llmkube.testing.cluster import MissingBinaryError, Tier, check_binaries, default_bin_dir

    bin_dir = default_bin_dir()
    checked_tier: Tier = "full" if tier == "full" else "api"
    try:
        check_binaries(bin_dir, checked_tier)
    except MissingBinaryError as missing:
        try:
            script = bundled_path(BUILD_SCRIPT)
        except MissingBundledFile as no_script:
            raise SystemExit(f"{missing}\n{no_script}") from None
        print(f"{missing}\nBuilding them now (one-off, several minutes)...", file=sys.stderr)
        subprocess.run(["bash", str(script)], check=True)
    return bin_dir


def _install_basics(cluster_kubeconfig: Path, with_sample: bool) -> None:
    from llmkube.api.crds import all_crds
    from llmkube.testing.rest import KubeRest, wait_for_crds

    admin = KubeRest.from_kubeconfig(cluster_kubeconfig)
    admin.apply_all(all_crds())
    wait_for_crds(admin, [crd["metadata"]["name"] for crd in all_crds()])
    admin.apply_all(manifest_documents(*LOCAL_INSTALL))
    if with_sample:
        admin.apply_all(manifest_documents(SAMPLE), namespace="default")


def _wait_for_interrupt() -> None:
    """Until Ctrl-C (SIGINT) or SIGTERM. Both are handled here whatever the process inherited: a
    shell starts a background job with SIGINT ignored, and Python then leaves it ignored, so
    `kill -INT` of such a job (or a test that sends it) would never stop it."""
    stop = False

    def handler(*_: object) -> None:
        nonlocal stop
        stop = True

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)
    while not stop:
        time.sleep(0.5)


def _cluster(args: argparse.Namespace) -> int:
    _require_testing_extra("cluster")
    from llmkube.testing.cluster import LocalCluster

    _ensure_binaries(args.tier)
    with LocalCluster(args.tier) as cluster:
        _install_basics(cluster.kubeconfig, with_sample=args.sample)
        print(
            f"local {args.tier} control plane ready in {cluster.startup_seconds.get(args.tier, 0):.1f}s\n"
            f"  export KUBECONFIG={cluster.kubeconfig}\n"
            f"  kubectl get nodes; kubectl get isvc,mdl -A\n"
            f"logs: {cluster.logs_dir}\nCtrl-C stops everything.",
            flush=True,
        )
        _wait_for_interrupt()
    return 0


def _run(args: argparse.Namespace) -> int:
    _local_roots_for_run(args)
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG")
    if kubeconfig or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return _controller(args)
    _require_testing_extra("run")
    from llmkube.testing.cluster import LocalCluster
    from llmkube.testing.real_run import choose_run_tier

    tier, why = choose_run_tier(args.tier)
    print(f"llmkube run: using {why}", file=sys.stderr, flush=True)
    if tier == "node":
        return _run_on_node(args)

    _ensure_binaries("full")
    with LocalCluster("full") as cluster:
        _install_basics(cluster.kubeconfig, with_sample=True)
        print(
            f"local control plane ready in {cluster.startup_seconds.get('full', 0):.1f}s "
            f"(3 kwok nodes, 3 fake GPUs); sample Model + InferenceService applied.\n"
            f"  export KUBECONFIG={cluster.kubeconfig}\n"
            f"  kubectl get isvc,mdl -o wide\n"
            f"component logs: {cluster.logs_dir}",
            flush=True,
        )
        args.kubeconfig = str(cluster.kubeconfig)
        # The components run in their own session, so a terminal's Ctrl-C reaches only this
        # process: the controller stops first, then the `with` block stops the control plane.
        return _controller(_loopback_endpoints(args))


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
    from llmkube.testing.node import NodeCluster
    from llmkube.testing.real_run import SAMPLE_NAME, TinyDemo

    with NodeCluster() as cluster:
        _install_basics(cluster.kubeconfig, with_sample=False)
        demo = TinyDemo(cluster, serve_port=args.serve_port).start()
        print(
            f"real node ready in {cluster.startup_seconds.get('node', 0):.1f}s; the tiny llama.cpp sample "
            f"({SAMPLE_NAME}: Model + InferenceService, and a pod serving its GGUF) is applied.\n"
            f"  export KUBECONFIG={cluster.kubeconfig}\n"
            f"  {cluster.kubectl} get isvc,mdl,pods -o wide\n"
            f"  {SAMPLE_NAME} will answer on {demo.url} (a line with curl follows once it is Ready)\n"
            f"component logs: {cluster.logs_dir}",
            flush=True,
        )
        # The controller runs in this thread: inside the node's network, like an in-cluster one, so
        # it reaches in-cluster URLs (the Model's source). The loopback forward was opened before.
        cluster.network.enter_current_thread()
        demo.announce_when_ready()
        args.kubeconfig = str(cluster.kubeconfig)
        # The sample's model server is a Service of the cluster, which is refused unless allowed.
        args.model_source_allowed_hosts = ",".join(
            filter(None, (args.model_source_allowed_hosts, demo.model_host))
        )
        return _controller(_loopback_endpoints(args))


def controllers_config(args: argparse.Namespace) -> "ControllersConfig":
    from datetime import timedelta

    from llmkube.controllers.setup import ControllersConfig
    from llmkube.plan.config import OperatorConfig
    from llmkube.plan.model.decision import ModelPlanConfig
    from llmkube.plan.model.local_roots import normalized_roots

    intel = os.environ.get("LLMKUBE_INTEL_GPU_RESOURCE") or "gpu.intel.com/i915"
    roots = normalized_roots((args.model_local_roots or "").split(","))
    return ControllersConfig(
        model_egress=egress_config(args),
        operator=OperatorConfig(
            model_cache_path=args.model_cache_path,
            model_cache_size=args.model_cache_size,
            model_cache_storage_class=args.model_cache_storage_class,
            model_cache_access_mode=args.model_cache_access_mode,
            ca_cert_configmap=args.ca_cert_configmap,
            init_container_image=args.init_container_image,
            default_fsgroup=args.default_fsgroup,
            intel_gpu_resource=intel,
            tenancy=tenancy_policy(args, roots),
        ),
        model=ModelPlanConfig(
            cache_path=args.model_cache_path,
            revalidate_interval=timedelta(seconds=args.model_revalidate_interval),
            intel_gpu_resource=intel,
            local_source_roots=roots,
        ),
        isvc_workers=args.workers,
        model_workers=model_workers_for(args.workers),
        model_copy_bytes_per_second=args.model_copy_bytes_per_second or None,
        manage_priority_classes=args.manage_priority_classes,
    )


def _listed(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def tenancy_policy(args: argparse.Namespace, roots: tuple[str, ...]) -> "TenancyPolicy":
    """What tenants may ask for (plan/tenancy.py). Raises ValueError for a value no cluster has."""
    from llmkube.plan.tenancy import SERVICE_TYPES, TenancyPolicy

    service_types = _listed(args.allowed_service_types)
    unknown = [t for t in service_types if t not in SERVICE_TYPES]
    if unknown or not service_types:
        raise ValueError(
            f"--allowed-service-types: {', '.join(unknown) or 'empty'}: "
            f"want some of {', '.join(SERVICE_TYPES)}"
        )
    classes = _listed(args.allowed_priority_classes)
    if reserved := [c for c in classes if c.startswith("system-")]:
        raise ValueError(
            f"--allowed-priority-classes: {', '.join(reserved)}: system-* classes are never allowed"
        )
    return TenancyPolicy(
        max_pod_security=args.max_pod_security,
        allowed_priority_classes=frozenset(classes),
        default_max_priority=args.default_max_priority,
        allowed_service_types=frozenset(service_types),
        local_source_roots=roots,
    )


def _parsed(flag: str, value: str | None, parse: "Callable[[str], T]") -> "T":
    try:
        return parse(value or "")
    except ValueError as invalid:
        raise ValueError(f"{flag}: {invalid}") from None


def egress_config(args: argparse.Namespace) -> "EgressConfig":
    """--model-source-allowed-hosts, --service-cidr, --pod-cidr; a ValueError names the flag."""
    from llmkube.plan.model.egress import EgressConfig, parse_allowed_hosts, parse_cidrs

    return EgressConfig(
        allowed_hosts=_parsed(
            "--model-source-allowed-hosts", args.model_source_allowed_hosts, parse_allowed_hosts
        ),
        service_cidrs=_parsed("--service-cidr", args.service_cidr, parse_cidrs),
        pod_cidrs=_parsed("--pod-cidr", args.pod_cidr, parse_cidrs),
    )


def manager_config(args: argparse.Namespace) -> "ManagerConfig":
    from llmkube.kube.leader_state import LeaderElectionTiming
    from llmkube.manager import ManagerConfig

    return ManagerConfig(
        kubeconfig=args.kubeconfig,
        namespace=args.namespace or None,
        workers=args.workers,
        leader_election=args.leader_elect,
        lease_namespace=args.leader_election_namespace,
        leader_timing=LeaderElectionTiming(
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        ),
        metrics_bind_address=args.metrics_bind_address,
        health_bind_address=args.health_probe_bind_address,
        log_level=args.log_level,
        log_format=args.log_format,
    )


def _controller(args: argparse.Namespace) -> int:
    import asyncio

    from llmkube.controllers.setup import setup_controllers
    from llmkube.kube.config import ConfigError
    from llmkube.kube.leader_election import LeadershipLost
    from llmkube.manager import CacheSyncTimeout, Manager

    try:
        process_config = manager_config(args)
        config = controllers_config(args)
    except ValueError as invalid:  # leader election timings client-go would refuse, a relative root
        print(f"llmkube controller: {invalid}", file=sys.stderr)
        return 2

    def setup(manager: Manager) -> None:
        setup_controllers(manager, config)

    try:
        asyncio.run(Manager(process_config).run(setup))
    except OSError as failed:  # e.g. a metrics or health port already in use: one line, no traceback
        print(f"llmkube controller: cannot start: {failed}", file=sys.stderr)
        return 1
    except (LeadershipLost, CacheSyncTimeout) as stopped:
        # Expected ways to stop: exit non-zero and let the Deployment restart the pod.
        print(f"llmkube controller stopped: {stopped}", file=sys.stderr)
        return 1
    except ConfigError as unusable:  # the kubeconfig or in-cluster configuration, with its reason
        print(f"llmkube controller: cannot connect to the cluster: {unusable}", file=sys.stderr)
        return 2
    return 0


def load_controller_modules(log_format: str) -> None:
    """Import the controller; without rich when its logs are JSON lines.

    structlog imports rich whenever it is installed (it is: the user commands draw with it), for
    the console renderer's tracebacks; JSON lines never use it. In a fresh process, before anything
    has imported structlog, rich is marked absent (None in sys.modules: an import of it raises
    ImportError, as if it were not installed): ~30 ms of CPU and 3 MiB less at every start."""
    console = log_format == "console" or (log_format == "auto" and sys.stderr.isatty())
    if not console and "structlog" not in sys.modules:
        sys.modules.setdefault("rich", None)  # type: ignore[arg-type]
    for module in CONTROLLER_MODULES:
        importlib.import_module(module)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmkube", description="Kubernetes operator for LLM inference.")
    parser.add_argument("--version", action="version", version=f"llmkube {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("version", help="print the version").set_defaults(func=_print_version)
    sub.add_parser("crds", help="print the CustomResourceDefinitions as YAML").set_defaults(func=_print_crds)

    cluster = sub.add_parser("cluster", help="start a local control plane (until Ctrl-C)")
    cluster.add_argument(
        "--tier",
        choices=["api", "full"],
        default="full",
        help="api: etcd and kube-apiserver; full: everything",
    )
    cluster.add_argument("--sample", action="store_true", help="also apply the CPU llama.cpp sample")
    cluster.set_defaults(func=_cluster)

    for name, func, help_text in (
        ("run", _run, "run the controller; starts a local cluster when none is configured"),
        ("controller", _controller, "run the controller against the configured cluster"),
    ):
        command = sub.add_parser(name, help=help_text)
        add_controller_flags(command)
        command.set_defaults(func=func)
        if name == "run":
            command.add_argument(
                "--tier",
                choices=["auto", "node", "full"],
                default="auto",
                help="local cluster without a kubeconfig: a real node where possible (auto), or kwok (full)",
            )
            command.add_argument(
                "--serve-port", type=int, default=18080, help="loopback port for the real node's sample"
            )
    from llmkube.usercli import add_user_commands

    add_user_commands(sub)
    return parser


def add_controller_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--kubeconfig", default=None, help="kubeconfig path (default: $KUBECONFIG, in-cluster)"
    )
    parser.add_argument(
        "--namespace",
        default=env("LLMKUBE_NAMESPACE", ""),
        help="watch one namespace only (default: all) [LLMKUBE_NAMESPACE]",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=int(env("LLMKUBE_WORKERS", str(DEFAULT_WORKERS))),
        help=f"concurrent InferenceService reconciles; Models get half, at most {MAX_MODEL_WORKERS} "
        f"(default {DEFAULT_WORKERS}) [LLMKUBE_WORKERS]",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=env("LLMKUBE_LEADER_ELECT") == "true",
        help="take the Lease before writing anything (for more than one replica) [LLMKUBE_LEADER_ELECT]",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=env("POD_NAMESPACE", "llmkube-system"),
        help="namespace of the leader-election Lease (default: $POD_NAMESPACE, else llmkube-system)",
    )
    # kube-controller-manager's names; controller-runtime's defaults.
    parser.add_argument(
        "--leader-elect-lease-duration",
        type=float,
        default=15.0,
        help="seconds a Lease is valid (default 15)",
    )
    parser.add_argument(
        "--leader-elect-renew-deadline",
        type=float,
        default=10.0,
        help="seconds the leader keeps trying to renew before it stops writing (default 10)",
    )
    parser.add_argument(
        "--leader-elect-retry-period",
        type=float,
        default=2.0,
        help="seconds between Lease attempts (default 2)",
    )
    parser.add_argument(
        "--metrics-bind-address",
        default=env("LLMKUBE_METRICS_BIND_ADDRESS", DEFAULT_METRICS_ADDRESS),
        help="address of /metrics, host:port (:0 picks a free port; 0 disables) "
        "[LLMKUBE_METRICS_BIND_ADDRESS]",
    )
    parser.add_argument(
        "--health-probe-bind-address",
        default=env("LLMKUBE_HEALTH_BIND_ADDRESS", DEFAULT_HEALTH_ADDRESS),
        help="address of /healthz and /readyz, host:port (:0 picks a free port) "
        "[LLMKUBE_HEALTH_BIND_ADDRESS]",
    )
    parser.add_argument(
        "--log-level",
        default=env("LLMKUBE_LOG_LEVEL", "info"),
        help="debug, info, warning or error (default info) [LLMKUBE_LOG_LEVEL]",
    )
    parser.add_argument(
        "--log-format",
        choices=["json", "console", "auto"],
        default=env("LLMKUBE_LOG_FORMAT", "auto"),
        help="JSON lines, console, or auto: console on a terminal, else JSON [LLMKUBE_LOG_FORMAT]",
    )
    parser.add_argument(
        "--model-cache-path",
        default="/models",
        help="where the controller copies local-path Models (empty: no controller-side cache)",
    )
    parser.add_argument(
        "--model-cache-size", default="100Gi", help="size of each namespace's llmkube-model-cache claim"
    )
    parser.add_argument(
        "--model-cache-storage-class", default="", help="storage class of that claim (default: the cluster's)"
    )
    parser.add_argument(
        "--model-cache-access-mode", default="ReadWriteOnce", help="access mode of that claim"
    )
    parser.add_argument(
        "--ca-cert-configmap",
        default="",
        help="ConfigMap with CA certificates the model downloader trusts (mounted into the init container)",
    )
    parser.add_argument(
        "--init-container-image",
        default="docker.io/curlimages/curl:8.18.0",
        help="image of the model-downloader init container",
    )
    parser.add_argument(
        "--default-fsgroup",
        type=int,
        default=102,
        help="pod fsGroup when the service sets no securityContext",
    )
    parser.add_argument(
        "--model-revalidate-interval",
        type=float,
        default=3600.0,
        help="seconds between checks of a Ready Model's source for upstream changes (default 3600)",
    )
    parser.add_argument(
        "--model-local-roots",
        default=env("LLMKUBE_MODEL_LOCAL_ROOTS"),
        metavar="DIR[,DIR...]",
        help="the only directories local-path Models (file://..., /...) may be read from, symbolic "
        "links leading out of them refused; empty (the default of `controller`) refuses every local "
        "source. `run` defaults to your home directory",
    )
    parser.add_argument(
        "--max-pod-security",
        choices=["privileged", "baseline", "restricted"],
        default=env("LLMKUBE_MAX_POD_SECURITY", "baseline"),
        help="the most a service's pods may be, as a Pod Security Standards level (default baseline): "
        "a spec asking for more (privileged, host namespaces, added capabilities, ...) is Failed with "
        "PolicyViolation; a namespace's pod-security.kubernetes.io/enforce label can only lower it "
        "[LLMKUBE_MAX_POD_SECURITY]",
    )
    parser.add_argument(
        "--allowed-priority-classes",
        default=env("LLMKUBE_ALLOWED_PRIORITY_CLASSES", ""),
        metavar="CLASS[,CLASS...]",
        help="PriorityClasses a service may name besides the llmkube-* ones (default none; system-* "
        "never) [LLMKUBE_ALLOWED_PRIORITY_CLASSES]",
    )
    parser.add_argument(
        "--default-max-priority",
        choices=["critical", "high", "normal", "low", "batch"],
        default=env("LLMKUBE_DEFAULT_MAX_PRIORITY", "critical"),
        help="the highest priority in a namespace without the inference.llmkube.dev/max-priority "
        "label (default critical: no ceiling) [LLMKUBE_DEFAULT_MAX_PRIORITY]",
    )
    parser.add_argument(
        "--allowed-service-types",
        default=env("LLMKUBE_ALLOWED_SERVICE_TYPES", "ClusterIP"),
        metavar="TYPE[,TYPE...]",
        help="Service types spec.endpoint.type may ask for: ClusterIP, NodePort, LoadBalancer "
        "(default ClusterIP) [LLMKUBE_ALLOWED_SERVICE_TYPES]",
    )
    parser.add_argument(
        "--model-source-allowed-hosts",
        default=env("LLMKUBE_MODEL_SOURCE_ALLOWED_HOSTS", ""),
        metavar="HOST[,HOST...]",
        help="hosts the controller may fetch Models' http(s) sources from although they are in a "
        "network it refuses (loopback, link-local and metadata addresses, the cluster's Service and "
        "Pod networks): host, *.domain, host:port, an IP address, [IPv6]:port or a CIDR. The API "
        "server's own endpoint is never allowed [LLMKUBE_MODEL_SOURCE_ALLOWED_HOSTS]",
    )
    parser.add_argument(
        "--service-cidr",
        default=env("LLMKUBE_SERVICE_CIDR", ""),
        metavar="CIDR[,CIDR...]",
        help="the cluster's Service networks, refused as model sources (default: read from the "
        "cluster's ServiceCIDR objects) [LLMKUBE_SERVICE_CIDR]",
    )
    parser.add_argument(
        "--pod-cidr",
        default=env("LLMKUBE_POD_CIDR", ""),
        metavar="CIDR[,CIDR...]",
        help="the cluster's Pod networks, refused as model sources (default: the Nodes' "
        "spec.podCIDRs) [LLMKUBE_POD_CIDR]",
    )
    parser.add_argument(
        "--model-copy-bytes-per-second",
        type=float,
        default=0.0,
        help="disk bandwidth cap of one model copy into the cache (0: no cap)",
    )
    parser.add_argument(
        "--manage-priority-classes",
        type=boolean_flag,
        nargs="?",
        const=True,
        default=boolean_flag(env("LLMKUBE_MANAGE_PRIORITY_CLASSES", "true")),
        help="create and repair the five llmkube-* PriorityClasses (default true); "
        "false when the installer (kustomize, Helm, GitOps) owns them: they are then never written",
    )


def boolean_flag(value: str) -> bool:
    """A Go-style boolean flag value: `--flag`, `--flag=true`, `--flag=false` (also 1/0, yes/no)."""
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


#: What the controller commands import before they start: loaded by `main` with the GC paused.
CONTROLLER_MODULES = ("llmkube.manager", "llmkube.controllers.setup")


def parse_and_load(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line parsed and, for the controller commands, the controller imported: what
    every start does before the command runs (bench/bench_import_cost.py measures exactly this)."""
    # Start-up creates ~60,000 GC-tracked objects (modules, classes, pydantic validators) that live
    # as long as the process, and little cyclic garbage: every collection on the way traverses them
    # all again, ~35 of the ~550 ms of CPU the controller's imports take. Collect once they are in.
    collecting = gc.isenabled()
    gc.disable()
    try:
        args = build_parser().parse_args(argv)
        if args.func in (_controller, _run):
            load_controller_modules(args.log_format)
    finally:
        if collecting:
            gc.enable()
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_and_load(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
