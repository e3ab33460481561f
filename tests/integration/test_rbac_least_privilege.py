"""Least privilege, proven on a real API server with the RBAC authorizer.

The controller runs in-process as a fresh ServiceAccount bound to nothing but the generated roles,
once per install shape (cluster-wide: the ClusterRole; namespace-scoped: a Role in the watched
namespace plus cluster-wide reads), through a scenario that makes it use every permission it has:
owned objects created, changed and deleted (HPA turned off, a switch to metal), a ModelRouter's
objects (its Role made of what the controller holds), the model cache claim, a prefetch Job created
and deleted, a pvc:// Model's claim read, a downloader's log read, Events created and patched as a
series, the PriorityClasses created and repaired (an immutable value: delete + create), the ConfigMap
of metal Services created and an entry added by hand undone, a pod past its lifetime evicted,
leader election. Then:

* no request was refused (403), and
* the verbs it used, by (verb, group, resource), are exactly those the list in
  `llmkube.controllers.permissions` grants: nothing granted is unused, nothing used is missing.

A dedicated API-tier control plane: the cluster-wide controller watches every namespace, and no
other test's objects may be there.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from llmkube_testing.cluster import LocalCluster, MissingBinaryError
from llmkube_testing.controller_harness import ControllerHarness, controller_running
from llmkube_testing.identities import service_account_kubeconfig
from llmkube_testing.request_log import RequestLog
from llmkube_testing.rest import KubeRest, RestError, wait_for_crds, wait_until

from llmkube.api.crds import all_crds
from llmkube.controllers.permissions import PERMISSIONS, granted
from llmkube.controllers.setup import ControllersConfig
from llmkube.plan.inferenceservice.priority import PRIORITY_CLASSES
from llmkube.plan.inferenceservice.storage import INIT_CONTAINER_NAME

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
API = "inference.llmkube.dev/v1alpha1"
MERGE = "application/merge-patch+json"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    try:
        local = LocalCluster("api").start()
    except MissingBinaryError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        admin = local.admin()
        admin.apply_all(all_crds())
        wait_for_crds(admin, [crd["metadata"]["name"] for crd in all_crds()])
        yield local
    finally:
        local.stop()


def documents(relative: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((MANIFESTS / relative).read_text()) if doc]


def bound_to(
    docs: list[dict[str, Any]], account: tuple[str, str], *, namespace: str, suffix: str
) -> list[dict[str, Any]]:
    """The generated RBAC objects, bound to `account` (namespace, name) instead of the controller's
    ServiceAccount; namespaced ones moved to `namespace`; cluster-scoped ones renamed (unique)."""
    found = []
    for doc in copy.deepcopy(docs):
        meta = doc["metadata"]
        if "namespace" in meta:
            meta["namespace"] = namespace
        else:
            meta["name"] = f"{meta['name']}-{suffix}"
        if "roleRef" in doc and doc["roleRef"]["kind"] == "ClusterRole":
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{suffix}"
        if "subjects" in doc:
            doc["subjects"] = [{"kind": "ServiceAccount", "namespace": account[0], "name": account[1]}]
        found.append(doc)
    return found


INSTALLS = {
    # name: (RBAC files, watch one namespace?)
    "cluster-wide": (
        ["rbac/cluster_role.yaml", "rbac/cluster_role_binding.yaml"],
        False,
    ),
    "namespace-scoped": (
        ["components/namespace-scoped/role.yaml", "components/namespace-scoped/cluster_role.yaml"],
        True,
    ),
}
ALWAYS = [
    "rbac/leader_election_role.yaml",
    "rbac/own_namespace_role.yaml",
    "rbac/priorityclass-writer/cluster_role.yaml",
]


async def eventually(check: Callable[[], Any], *, within: float = 60, what: str = "condition") -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: wait_until(check, timeout=within, what=what))


def exists(admin: KubeRest, api_version: str, kind: str, name: str, namespace: str | None) -> bool:
    return admin.get_or_none(api_version, kind, name, namespace) is not None


def phase(admin: KubeRest, kind: str, name: str, namespace: str) -> str | None:
    obj = admin.get_or_none(API, kind, name, namespace) or {}
    value = (obj.get("status") or {}).get("phase")
    return value if isinstance(value, str) else None


@dataclass
class Running:
    controller: ControllerHarness
    namespace: str


@pytest.fixture
async def running(
    cluster: LocalCluster, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Running]:
    install: str = request.param
    files, scoped = INSTALLS[install]
    admin = cluster.admin()
    namespace = f"rbac-{install}-{uuid.uuid4().hex[:5]}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    account = (namespace, "llmkube-controller")
    kubeconfig = service_account_kubeconfig(cluster.kubeconfig, *account, tmp_path / "controller.kubeconfig")
    rbac: list[dict[str, Any]] = []
    for relative in [*files, *ALWAYS]:
        rbac += bound_to(documents(relative), account, namespace=namespace, suffix=namespace)
    for doc in rbac:
        admin.apply(doc)
    classes_to_repair(admin)
    try:
        async with controller_running(
            kubeconfig,
            ControllersConfig(manage_priority_classes=True, controller_namespace=namespace),
            namespace=namespace if scoped else None,
            leader_election=True,
            lease_namespace=namespace,
        ) as controller:
            yield Running(controller, namespace)
    finally:
        # Leave nothing a later controller (watching every namespace) would act on.
        for api_version, kind in (
            (API, "InferenceService"),
            (API, "Model"),
            ("apps/v1", "Deployment"),
            ("v1", "Service"),
            ("autoscaling/v2", "HorizontalPodAutoscaler"),
            ("v1", "PersistentVolumeClaim"),
            ("batch/v1", "Job"),
        ):
            for obj in admin.list(api_version, kind, namespace):
                try:
                    admin.delete(api_version, kind, obj["metadata"]["name"], namespace)
                except RestError as error:
                    if error.status != 404:
                        raise


def model(name: str, source: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": name},
        "spec": {"source": source, **spec},
    }


def isvc(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name}, "spec": spec}


def merge_patch(admin: KubeRest, kind: str, name: str, namespace: str, body: dict[str, Any]) -> None:
    admin.request("PATCH", admin.path_for(API, kind, namespace, name), body, content_type=MERGE)


def classes_to_repair(admin: KubeRest) -> None:
    """Before the controller starts: llmkube-low missing, llmkube-batch with another value (value is
    immutable, so only a delete and a create repair it)."""
    for name in ("llmkube-low", "llmkube-batch"):
        try:
            admin.delete("scheduling.k8s.io/v1", "PriorityClass", name)
        except RestError as error:
            if error.status != 404:
                raise
    wait_until(
        lambda: admin.get_or_none("scheduling.k8s.io/v1", "PriorityClass", "llmkube-batch") is None,
        timeout=30,
        what="llmkube-batch gone",
    )
    wrong = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "llmkube-batch"},
    }
    admin.create({**wrong, "value": 7})


async def exercise_every_permission(admin: KubeRest, namespace: str) -> None:
    ns = namespace
    # Owned objects: get (is the name free?), then server-side apply creates them; the model
    # cache claim is created for an http(s) source.
    admin.create(model("remote", "https://models.invalid/tiny.gguf"), namespace=ns)
    autoscaling = {"minReplicas": 1, "maxReplicas": 2}
    admin.create(isvc("web", modelRef="remote", autoscaling=autoscaling), namespace=ns)
    for api_version, kind, name in (
        ("apps/v1", "Deployment", "web"),
        ("v1", "Service", "web"),
        ("autoscaling/v2", "HorizontalPodAutoscaler", "web"),
        ("v1", "PersistentVolumeClaim", "llmkube-model-cache"),
    ):
        await eventually(
            lambda a=api_version, k=kind, n=name: exists(admin, a, k, n, ns), what=f"{kind} {name}"
        )
    # Autoscaling turned off: the HPA is deleted.
    merge_patch(admin, "InferenceService", "web", ns, {"spec": {"autoscaling": None}})
    await eventually(
        lambda: not exists(admin, "autoscaling/v2", "HorizontalPodAutoscaler", "web", ns), what="HPA deleted"
    )
    # Served by a host agent from now on: the Deployment is deleted, the Service loses its selector
    # (the agents' EndpointSlices are its endpoints).
    admin.create(model("metal", "org/metal-model", hardware={"accelerator": "metal"}), namespace=ns)
    merge_patch(admin, "InferenceService", "web", ns, {"spec": {"modelRef": "metal"}})
    await eventually(lambda: not exists(admin, "apps/v1", "Deployment", "web", ns), what="Deployment deleted")
    await eventually(
        lambda: "selector" not in admin.get("v1", "Service", "web", ns)["spec"],
        what="Service without selector",
    )

    # Its Service is listed for the host agents' admission policy: the ConfigMap of metal Services
    # (in the controller's namespace, here the test's) is created, cached by name. An entry someone
    # adds by hand is undone: the whole object read, its managedFields patched, then the apply.
    def metal_services() -> dict[str, str]:
        found = admin.get_or_none("v1", "ConfigMap", "llmkube-metal-services", ns) or {}
        return dict(found.get("data") or {})

    listed = await eventually(lambda: metal_services().get(f"{ns}.web") and metal_services(), what="listed")
    stray = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "llmkube-metal-services"}}
    admin.apply({**stray, "data": {"kube-system.kube-dns": "forged"}}, field_manager="kubectl", namespace=ns)
    await eventually(lambda: metal_services() == listed, what="the hand-made entry undone")
    # A ModelRouter: its ServiceAccount, Role and RoleBinding (get, then created by server-side
    # apply: the Role grants only what the controller holds itself), Service and Deployment, status.
    router = {
        "apiVersion": API,
        "kind": "ModelRouter",
        "metadata": {"name": "front"},
        "spec": {
            "backends": [{"name": "web", "inferenceServiceRef": {"name": "web"}}],
            "defaultRoute": "web",
        },
    }
    admin.create(router, namespace=ns)
    for api_version, kind in (
        ("v1", "ServiceAccount"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("v1", "Service"),
        ("apps/v1", "Deployment"),
    ):
        await eventually(
            lambda a=api_version, k=kind: exists(admin, a, k, "front-router-proxy", ns), what=f"router {kind}"
        )
    await eventually(lambda: phase(admin, "ModelRouter", "front", ns) == "Provisioning", what="router status")
    # A GPUQuota: its status (what it holds, who waits) written.
    quota = {
        "apiVersion": API,
        "kind": "GPUQuota",
        "metadata": {"name": "team"},
        "spec": {"namespaceRef": ns, "gpuCount": 2},
    }
    admin.create(quota, namespace=ns)

    def quota_observed() -> bool:
        found = admin.get_or_none(API, "GPUQuota", "team", ns) or {}
        return (found.get("status") or {}).get("observedGeneration") == 1

    await eventually(quota_observed, what="the GPUQuota's status")
    # A prefetched Model: its Job is created, and deleted once prefetch is turned off.
    admin.create(model("early", "https://models.invalid/early.gguf", prefetch=True), namespace=ns)

    def prefetch_jobs() -> list[dict[str, Any]]:
        return admin.list("batch/v1", "Job", ns)

    await eventually(prefetch_jobs, what="the prefetch Job")
    merge_patch(admin, "Model", "early", ns, {"spec": {"prefetch": False}})
    await eventually(lambda: not prefetch_jobs(), what="the prefetch Job deleted")
    # A pvc:// Model: the claim is read (it does not exist).
    admin.create(model("claimed", "pvc://no-such-claim/m.gguf"), namespace=ns)
    await eventually(lambda: phase(admin, "Model", "claimed", ns) == "Failed", what="claimed Failed")
    # An invalid spec: an InvalidSpec Event, then (the same warning again for a new generation that
    # is just as invalid: warnings are announced once per generation) a series, patched.
    admin.create(model("hf", "org/model"), namespace=ns)
    admin.create(isvc("bad", modelRef="hf", skipModelInit=True, resources={"cpu": "two"}), namespace=ns)
    await eventually(lambda: phase(admin, "InferenceService", "bad", ns) == "Failed", what="bad Failed")

    def invalid_spec_events() -> list[dict[str, Any]]:
        return [
            e
            for e in admin.list("events.k8s.io/v1", "Event", ns)
            if e.get("reason") == "InvalidSpec" and (e.get("regarding") or {}).get("name") == "bad"
        ]

    await eventually(lambda: invalid_spec_events(), what="the InvalidSpec event")
    merge_patch(admin, "InferenceService", "bad", ns, {"spec": {"replicas": 2}})
    await eventually(
        lambda: any((e.get("series") or {}).get("count", 0) >= 2 for e in invalid_spec_events()),
        what="the event patched into a series",
    )
    # PriorityClasses: the one missing at start is created, the one with another (immutable) value is
    # deleted and created again (see classes_to_repair).
    values = {pc.name: pc.value for pc in PRIORITY_CLASSES}
    low, batch = "llmkube-low", "llmkube-batch"

    def repaired(name: str) -> bool:
        found = admin.get_or_none("scheduling.k8s.io/v1", "PriorityClass", name)
        return found is not None and found["value"] == values[name]

    await eventually(lambda: repaired(low) and repaired(batch), what="the classes repaired")


async def read_a_download_log(admin: KubeRest, namespace: str, requests: RequestLog) -> None:
    """A pod of a service sits in its model-downloader: the controller reads the downloader's last
    log lines (pods/log get). No kubelet here, so the pod is made by hand and the API server cannot
    serve the log (it answers 400, after authorizing the read): the request is what counts."""
    ns = namespace
    if not exists(admin, "v1", "ServiceAccount", "default", ns):  # no controller-manager in this tier
        admin.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}, namespace=ns
        )
    admin.create(isvc("fetching", modelRef="remote"), namespace=ns)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fetching-0", "labels": {"inference.llmkube.dev/service": "fetching"}},
        "spec": {
            "initContainers": [{"name": INIT_CONTAINER_NAME, "image": "busybox"}],
            "containers": [{"name": "server", "image": "busybox"}],
        },
    }
    admin.create(pod, namespace=ns)
    running = {"name": INIT_CONTAINER_NAME, "image": "busybox", "imageID": "", "ready": False}
    status = {
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [{**running, "restartCount": 0, "state": {"running": {}}}],
        }
    }
    admin.request(
        "PATCH", admin.path_for("v1", "Pod", ns, "fetching-0") + "/status", status, content_type=MERGE
    )

    def log_read() -> bool:
        return ("get", "", "pods/log") in requests.used()

    await eventually(log_read, what="the downloader's log read")
    admin.delete("v1", "Pod", "fetching-0", ns)


async def evict_a_pod_past_its_lifetime(admin: KubeRest, namespace: str, requests: RequestLog) -> None:
    """A service with spec.maxPodLifetimeSeconds whose one replica is ready and has run longer: the
    controller evicts it (pods/eviction create). No controller-manager or kubelet here: the
    Deployment's status and the pod are written by hand."""
    ns = namespace
    admin.create(isvc("aged", modelRef="remote", maxPodLifetimeSeconds=60), namespace=ns)
    await eventually(lambda: exists(admin, "apps/v1", "Deployment", "aged", ns), what="Deployment aged")
    deployment_status = {"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}}
    admin.request(
        "PATCH",
        admin.path_for("apps/v1", "Deployment", ns, "aged") + "/status",
        deployment_status,
        content_type=MERGE,
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "aged-0", "labels": {"inference.llmkube.dev/service": "aged"}},
        "spec": {"containers": [{"name": "server", "image": "busybox"}]},
    }
    admin.create(pod, namespace=ns)
    started = {"status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}}
    admin.request("PATCH", admin.path_for("v1", "Pod", ns, "aged-0") + "/status", started, content_type=MERGE)

    def evicted() -> bool:
        return ("create", "", "pods/eviction") in requests.used()

    await eventually(evicted, what="the pod past its lifetime evicted")


@pytest.mark.parametrize("running", list(INSTALLS), indirect=True)
async def test_the_controller_uses_exactly_what_its_rbac_grants(
    running: Running, cluster: LocalCluster
) -> None:
    await exercise_every_permission(cluster.admin(), running.namespace)
    requests = running.controller.requests
    await read_a_download_log(cluster.admin(), running.namespace, requests)
    await evict_a_pod_past_its_lifetime(cluster.admin(), running.namespace, requests)
    await running.controller.stop()  # the lease release (an update) counts too

    refused = {code: n for (_, code), n in requests.request_counts.items() if code == "403"}
    assert not refused, f"requests refused: {refused}"
    used = requests.used()
    expected = granted(p for p in PERMISSIONS if not p.grant_only)
    assert sorted(used - granted(PERMISSIONS)) == [], "used, but not in llmkube.controllers.permissions"
    assert sorted(expected - used) == [], "granted, but never used: take it out of the role"
    # What it holds only to grant its routers, it never uses itself.
    assert not used & (granted(PERMISSIONS) - expected), "a grant-only permission was used"
