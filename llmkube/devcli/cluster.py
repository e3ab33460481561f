"""`llmkube cluster`: a local control plane (etcd, kube-apiserver and, for tier full, the
controller-manager, scheduler and kwok nodes) until Ctrl-C. A developer's command: it needs the
`testing` extra, which the controller image leaves out."""

import argparse
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from llmkube.bundled import MissingBundledFile, bundled_path, manifest_documents

BUILD_SCRIPT = "hack/build-k8s.sh"
SAMPLE = "samples/cpu-llamacpp.yaml"
#: What a local cluster gets before the controller starts. No PriorityClasses: `llmkube run`'s
#: controller owns them (--manage-priority-classes, the default), so nobody else writes them.
LOCAL_INSTALL = ("manager/namespace.yaml", "rbac", "rbac/priorityclass-writer")


def require_testing_extra(command: str) -> None:
    """A local cluster is test tooling: the `llmkube_testing` package of a checkout (tests/support,
    on the path of the checkout's editable install) and the `testing` extra (certificates, a tiny
    GGUF model). Neither ships in the wheel or the image: say so rather than fail on an import deep
    inside."""
    try:
        import llmkube_testing  # noqa: F401
    except ImportError:
        raise SystemExit(
            f"llmkube {command} is a developer command: it runs from a checkout of llmkube, whose "
            "local clusters live in tests/support (git clone, then `make run`, or `make venv` and "
            f"`.venv/bin/llmkube {command}`); the installed package carries no test tooling"
        ) from None
    try:
        import cryptography  # noqa: F401
        import gguf  # noqa: F401
    except ImportError as missing:
        raise SystemExit(
            f"llmkube {command}: a local cluster needs the 'testing' extra ({missing.name} is not "
            "installed): pip install -e '.[testing]' in the checkout"
        ) from None


def ensure_binaries(tier: str) -> Path:
    from llmkube_testing.cluster import MissingBinaryError, Tier, check_binaries, default_bin_dir

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


def install_basics(cluster_kubeconfig: Path, with_sample: bool) -> None:
    from llmkube_testing.rest import KubeRest, wait_for_crds

    from llmkube.api.crds import all_crds

    admin = KubeRest.from_kubeconfig(cluster_kubeconfig)
    admin.apply_all(all_crds())
    wait_for_crds(admin, [crd["metadata"]["name"] for crd in all_crds()])
    admin.apply_all(manifest_documents(*LOCAL_INSTALL))
    if with_sample:
        admin.apply_all(manifest_documents(SAMPLE), namespace="default")


def _handle_interrupts() -> Callable[[], bool]:
    """From now on, Ctrl-C (SIGINT) and SIGTERM only mark the process as interrupted (the returned
    function tells). Both are handled here whatever the process inherited: a shell starts a
    background job with SIGINT ignored, and Python then leaves it ignored, so `kill -INT` of such a
    job (or a test that sends it) would never stop it."""
    stop = False

    def handler(*_: object) -> None:
        nonlocal stop
        stop = True

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)
    return lambda: stop


def _wait_for_interrupt(interrupted: Callable[[], bool] | None = None) -> None:
    """Until Ctrl-C (SIGINT) or SIGTERM (handled from the call of `_handle_interrupts`, if given)."""
    interrupted = interrupted or _handle_interrupts()
    while not interrupted():
        time.sleep(0.5)


def run_cluster(args: argparse.Namespace) -> int:
    require_testing_extra("cluster")
    from llmkube_testing.cluster import LocalCluster

    ensure_binaries(args.tier)
    with LocalCluster(args.tier, keep_workdir=keep_logs(args)) as cluster:
        install_basics(cluster.kubeconfig, with_sample=args.sample)
        # Handled before the message that invites it: a Ctrl-C right after it stops cleanly too.
        interrupted = _handle_interrupts()
        print(
            f"local {args.tier} control plane ready in {cluster.startup_seconds.get(args.tier, 0):.1f}s\n"
            f"  export KUBECONFIG={cluster.kubeconfig}\n"
            f"  kubectl get nodes; kubectl get isvc,mdl -A\n"
            f"logs: {cluster.logs_dir} ({where_logs_go(cluster.keep_workdir)})\nCtrl-C stops everything.",
            flush=True,
        )
        _wait_for_interrupt(interrupted)
    return 0


def keep_logs(args: argparse.Namespace) -> bool | None:
    """`--keep-logs` keeps the directory; without it, LLMKUBE_KEEP_CLUSTER_DIR decides (None)."""
    return True if getattr(args, "keep_logs", False) else None


def where_logs_go(kept: bool) -> str:
    if kept:
        return "kept after the stop"
    return "removed at a clean stop, kept if the run fails; --keep-logs keeps them"
