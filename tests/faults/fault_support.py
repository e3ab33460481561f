"""What the fault tests share: a control plane of their own (they kill its API server), the
controller in-process or as real processes, services that become Ready on kwok nodes, and ways to
wait for convergence and to count what the controller wrote.

`LLMKUBE_FAULT_LONG=1` (`make fault-long`) runs the longer variants: more services, more kills,
the real default timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from llmkube_testing.audit import AuditEntry, read_audit
from llmkube_testing.cluster import CONTROLLER_USER, LocalCluster, MissingBinaryError, Tier
from llmkube_testing.controller_harness import ControllerHarness, controller_running
from llmkube_testing.request_log import RequestLog
from llmkube_testing.rest import KubeRest, load_yaml_documents, wait_for_crds, wait_until

from llmkube.api.crds import all_crds
from llmkube.controllers.setup import ControllersConfig
from llmkube.manager import Manager
from llmkube.plan.model.decision import ModelPlanConfig

ROOT = Path(__file__).resolve().parents[2]
API = "inference.llmkube.dev/v1alpha1"
MERGE = "application/merge-patch+json"
LONG = os.environ.get("LLMKUBE_FAULT_LONG") == "1"


def long_or(default: Any, long: Any) -> Any:
    return long if LONG else default


def install(cluster: LocalCluster) -> None:
    """CRDs, the controller's namespace and its RBAC (bound to the identity named like its
    ServiceAccount, which the cluster's controller kubeconfig uses)."""
    admin = cluster.admin()
    admin.apply_all(all_crds())
    wait_for_crds(admin, [crd["metadata"]["name"] for crd in all_crds()])
    docs = load_yaml_documents(ROOT / "manifests" / "manager" / "namespace.yaml")
    # The installer owns the PriorityClasses (pods name them; the controllers here do not write them).
    docs += load_yaml_documents(ROOT / "manifests" / "priorityclasses" / "priority_classes.yaml")
    for rbac in (ROOT / "manifests" / "rbac", ROOT / "manifests" / "rbac" / "priorityclass-writer"):
        for path in sorted(rbac.glob("*.yaml")):
            if path.name != "kustomization.yaml":
                docs += load_yaml_documents(path)
    admin.apply_all(docs)


def installed_cluster(tier: Tier, **options: Any) -> Iterator[LocalCluster]:
    """A local cluster of the fault suite's own (its processes get killed), with `install`ed CRDs and
    RBAC; stopped afterwards. The body of the suite's cluster fixtures."""
    try:
        cluster = LocalCluster(tier, **options).start()
    except MissingBinaryError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        install(cluster)
        yield cluster
    finally:
        cluster.stop()


# -- objects -------------------------------------------------------------------------------------


def hf_model(name: str) -> dict[str, Any]:
    """Ready at once (the runtime would fetch it): no download, no cache claim."""
    return {"apiVersion": API, "kind": "Model", "metadata": {"name": name}, "spec": {"source": f"org/{name}"}}


def isvc(name: str, model: str = "m", **spec: Any) -> dict[str, Any]:
    body = {"modelRef": model, "skipModelInit": True, "resources": {"cpu": "100m", "memory": "128Mi"}, **spec}
    return {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name}, "spec": body}


def create_services(admin: KubeRest, namespace: str, names: list[str], model: str = "m") -> None:
    if admin.get_or_none(API, "Model", model, namespace) is None:
        admin.create(hf_model(model), namespace=namespace)
    for name in names:
        admin.create(isvc(name, model), namespace=namespace)


def merge_patch(admin: KubeRest, kind: str, name: str, namespace: str, body: dict[str, Any]) -> None:
    admin.request("PATCH", admin.path_for(API, kind, namespace, name), body, content_type=MERGE)


# -- convergence ---------------------------------------------------------------------------------


def not_converged(admin: KubeRest, namespace: str, replicas: dict[str, int] | None = None) -> list[str]:
    """The services of `namespace` that are not Ready with their Deployment as planned (the replica
    counts given, 1 otherwise): empty once everything converged."""
    deployments = {d["metadata"]["name"]: d for d in admin.list("apps/v1", "Deployment", namespace)}
    pending = []
    for service in admin.list(API, "InferenceService", namespace):
        name = service["metadata"]["name"]
        status = service.get("status") or {}
        want = (replicas or {}).get(name, 1)
        deployment = deployments.get(name)
        if (
            status.get("phase") != "Ready"
            or status.get("desiredReplicas") != want
            or deployment is None
            or deployment["spec"].get("replicas") != want
            or (status.get("readyReplicas") or 0) != want
        ):
            pending.append(f"{name}:{status.get('phase')}")
    return sorted(pending)


async def converged(
    admin: KubeRest, namespace: str, *, within: float, replicas: dict[str, int] | None = None
) -> float:
    """Wait until every service of the namespace converged; returns the seconds it took."""
    started = time.monotonic()
    last: list[list[str]] = [[]]

    def check() -> bool:
        last[0] = not_converged(admin, namespace, replicas)
        return not last[0]

    try:
        await eventually(check, within=within, what=f"every service of {namespace} converged")
    except TimeoutError as error:
        raise AssertionError(f"not converged after {within}s: {last[0][:10]} ({error})") from error
    return time.monotonic() - started


async def eventually(check: Callable[[], Any], *, within: float = 60, what: str = "condition") -> Any:
    """Poll a blocking check without blocking the event loop the controller may run on."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        None, lambda: wait_until(check, timeout=within, interval=0.2, what=what)
    )


async def poll(check: Callable[[], Any], *, within: float, what: str) -> float:
    """Wait, on the loop, for a check of in-memory state; returns the seconds it took."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > within:
            raise AssertionError(f"no {what} within {within}s")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


# -- the controller in-process -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def in_process(
    kubeconfig: Path,
    *,
    namespace: str | None = None,
    controllers: ControllersConfig | None = None,
    **config: Any,
) -> AsyncIterator[ControllerHarness]:
    """The whole controller in this process (llmkube_testing.controller_harness; leader election
    off), as the given identity; `controllers` replaces the suite's default ControllersConfig (no
    local roots, the default egress, the installer owns the PriorityClasses); `config` are
    ManagerConfig fields."""
    async with controller_running(
        kubeconfig,
        controllers or ControllersConfig(model=ModelPlanConfig(), manage_priority_classes=False),
        namespace=namespace,
        start_timeout=90,
        **config,
    ) as running:
        yield running


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


async def quiesced(requests: RequestLog, *, quiet_for: float = 3.0, within: float = 60.0) -> int:
    """Wait until the controller made no mutating request for `quiet_for` seconds; returns its count."""
    deadline = time.monotonic() + within
    last, since = requests.mutating_requests(), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        count = requests.mutating_requests()
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= quiet_for:
            return int(count)
    raise AssertionError(f"the controller kept writing for {within}s")


def watches_open(manager: Manager) -> bool:
    """Every informer of the manager has its watch open."""
    return all(informer.reflector.stats.watching for informer in manager.informers)


# -- writes, as the API server counted them (audit log) -------------------------------------


def writes_in(cluster: LocalCluster, namespace: str, since: datetime) -> list[AuditEntry]:
    """The controller identity's writes in `namespace` since `since`, refused ones included: the
    server's count survives a controller killed with SIGKILL (its own counters do not)."""
    assert cluster.audit_log is not None, "a cluster started with audit=True"
    return [
        entry
        for entry in read_audit(cluster.audit_log, user=CONTROLLER_USER, since=since)
        if entry.mutating and entry.namespace == namespace
    ]


async def writes_settle(
    cluster: LocalCluster, namespace: str, since: datetime, quiet_for: float = 3.0
) -> int:
    """Wait until the API server has seen no write of the controller in `namespace` for `quiet_for`
    seconds; returns how many it saw since `since`."""
    loop = asyncio.get_running_loop()
    last, stable_since = -1, loop.time()
    for _ in range(600):
        count = len(writes_in(cluster, namespace, since))
        if count != last:
            last, stable_since = count, loop.time()
        elif loop.time() - stable_since >= quiet_for:
            return count
        await asyncio.sleep(0.2)
    raise AssertionError("the controller kept writing")
