"""pytest fixtures that give tests a real Kubernetes API server.

One cluster per test session per tier (started lazily, only when a test asks for it), a fresh
namespace per test. Where the cluster comes from:

- `LLMKUBE_TEST_KUBECONFIG=<path>`: that cluster, for both tiers (nothing is started).
- `LLMKUBE_TEST_CLUSTER=k3s`: a k3s container through testcontainers (needs a Docker engine;
  skipped with the reason printed when there is none).
- otherwise: `LocalCluster` from binaries built by `hack/build-k8s.sh`.

The `node` tier (`node_cluster`, `node_namespace`) is always local: a real kubelet and containerd
in a private network namespace (`llmkube_testing.node`), for root on Linux; elsewhere its tests are
skipped with the reason.

Load it with `pytest_plugins = ["llmkube_testing.pytest_plugin"]`.
"""

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from llmkube.plan.tenancy import LOCAL_SOURCES_ALLOWED, LOCAL_SOURCES_LABEL
from llmkube_testing import cluster as cluster_module
from llmkube_testing.cluster import LocalCluster, MissingBinaryError, Tier
from llmkube_testing.node import HOST_PROGRAMS, NodeCluster, node_tier_unavailable
from llmkube_testing.rest import KubeRest, RestError, wait_for_crds

K3S_IMAGE = "rancher/k3s:v1.33.5-k3s1"  # pinned: `latest` would change under us


@dataclass
class ClusterHandle:
    """What a test needs to talk to a cluster, whichever way it was provided."""

    tier: Tier
    server: str
    kubeconfig: Path
    workdir: Path
    restricted_kubeconfig: Path | None = None
    controller_kubeconfig: Path | None = None
    etcd_endpoint: str | None = None
    local: LocalCluster | None = None
    startup_seconds: dict[str, float] = field(default_factory=dict)

    def admin(self) -> KubeRest:
        return KubeRest.from_kubeconfig(self.kubeconfig)

    def restricted(self) -> KubeRest:
        if self.restricted_kubeconfig is None:
            pytest.skip("this cluster has no restricted identity (external kubeconfig)")
        return KubeRest.from_kubeconfig(self.restricted_kubeconfig)


def _docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    result = subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=20)
    return result.returncode == 0


def failed_tests(session: pytest.Session) -> str | None:
    """Why the test session counts as failed so far: a cluster stopped then keeps its directory."""
    failed = session.testsfailed
    return f"{failed} test{'s' if failed != 1 else ''} failed in this session" if failed else None


def pytest_sessionstart(session: pytest.Session) -> None:
    # Every cluster a test starts (these fixtures, the fault and install suites' own) asks this
    # when it stops: after a failed test its directory, the logs, stays and stderr names it.
    cluster_module.run_failure = lambda: failed_tests(session)


def _provide(tier: Tier) -> Iterator[ClusterHandle]:
    if kubeconfig := os.environ.get("LLMKUBE_TEST_KUBECONFIG"):
        path = Path(kubeconfig)
        rest = KubeRest.from_kubeconfig(path)
        scratch = Path(tempfile.mkdtemp(prefix="llmkube-ext-"))
        try:
            yield ClusterHandle(tier, rest.server, path, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return
    if os.environ.get("LLMKUBE_TEST_CLUSTER") == "k3s":
        if not _docker_available():
            pytest.skip("LLMKUBE_TEST_CLUSTER=k3s needs a running Docker engine, and there is none here")
        from testcontainers.k3s import K3SContainer

        with K3SContainer(image=K3S_IMAGE) as k3s:
            workdir = Path(tempfile.mkdtemp(prefix="llmkube-k3s-"))
            path = workdir / "kubeconfig"
            path.write_text(k3s.config_yaml())
            try:
                yield ClusterHandle(tier, KubeRest.from_kubeconfig(path).server, path, workdir)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
        return
    try:
        cluster = LocalCluster(tier).start()
    except MissingBinaryError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield ClusterHandle(
            tier=tier,
            server=cluster.server,
            kubeconfig=cluster.kubeconfig,
            workdir=cluster.workdir,
            restricted_kubeconfig=cluster.restricted_kubeconfig,
            controller_kubeconfig=cluster.controller_kubeconfig,
            etcd_endpoint=cluster.etcd_endpoint,
            local=cluster,
            startup_seconds=cluster.startup_seconds,
        )
    finally:
        cluster.stop()


_started: list[ClusterHandle] = []


@pytest.fixture(scope="session")
def api_cluster() -> Iterator[ClusterHandle]:
    """etcd + kube-apiserver with RBAC on: no controllers, no scheduler, no nodes. Its directory is
    removed at the end of the session, or kept (and named on stderr) when a test failed or
    LLMKUBE_KEEP_CLUSTER_DIR=1."""
    for cluster in _provide("api"):
        _started.append(cluster)
        yield cluster


@pytest.fixture(scope="session")
def full_cluster() -> Iterator[ClusterHandle]:
    """api + controller-manager + scheduler + kwok nodes with GPUs (its directory: as api_cluster's)."""
    for cluster in _provide("full"):
        _started.append(cluster)
        yield cluster


def require_node_tier() -> None:
    """Skip, with the reason, where a real node cannot run: not Linux, not root, no containerd."""
    if reason := node_tier_unavailable():
        pytest.skip(reason)
    if missing := [program for program in HOST_PROGRAMS if not os.access(program, os.X_OK)]:
        pytest.skip(f"the node tier needs {', '.join(missing)} (install with: bash hack/node-host.sh)")


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[NodeCluster]:
    """api + controller-manager + scheduler + one real node (kubelet, containerd, kube-proxy, CNI
    bridge) in a private network namespace, with the locally built images imported."""
    require_node_tier()
    try:
        # Audited: the API server's own record of what the pods' ServiceAccounts were refused.
        cluster = NodeCluster(audit=True).start()
    except MissingBinaryError as err:
        pytest.fail(str(err), pytrace=False)
    _started.append(
        ClusterHandle(
            "node",
            cluster.server,
            cluster.kubeconfig,
            cluster.workdir,
            startup_seconds=cluster.startup_seconds,
        )
    )
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def node_namespace(node_cluster: NodeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace on the node tier, deleted after the test (its pods with it)."""
    yield from fresh_namespace(node_cluster, request)


class _Administered(Protocol):
    def admin(self) -> KubeRest: ...


def fresh_namespace(cluster: _Administered, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace named after the test (unique), deleted afterwards: the body of every namespace
    fixture, whichever cluster it is on."""
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()
    metadata: dict[str, Any] = {"name": name}
    if request.node.get_closest_marker("local_sources") is not None:
        # As an admin allows local model sources for a namespace (llmkube/plan/tenancy.py).
        metadata["labels"] = {LOCAL_SOURCES_LABEL: LOCAL_SOURCES_ALLOWED}
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
    try:
        yield name
    finally:
        with contextlib.suppress(RestError):
            admin.delete("v1", "Namespace", name)


@pytest.fixture
def namespace(api_cluster: ClusterHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in the api-tier cluster, deleted after the test."""
    yield from fresh_namespace(api_cluster, request)


@pytest.fixture
def full_namespace(full_cluster: ClusterHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in the full-tier cluster, deleted after the test."""
    yield from fresh_namespace(full_cluster, request)


def apply_manifests(cluster: ClusterHandle, docs: list[dict[str, Any]], namespace: str | None = None) -> None:
    """Server-side apply each document; waits for CRDs among them to be Established."""
    admin = cluster.admin()
    for doc in docs:
        admin.apply(doc, namespace=namespace)
    crds = [d["metadata"]["name"] for d in docs if d.get("kind") == "CustomResourceDefinition"]
    if crds:
        wait_for_crds(admin, crds)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for cluster in _started:
        if cluster.startup_seconds:
            timings = ", ".join(f"{k} {v:.1f}s" for k, v in cluster.startup_seconds.items())
            terminalreporter.write_line(f"llmkube local control plane ({cluster.tier}): started in {timings}")
