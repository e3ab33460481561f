"""A hostile tenant, from its own kubeconfig (ServiceAccount bound to `llmkube-editor` in its
namespace only), against the controller running with its least-privilege identity: whatever the
tenant names in a Model or an InferenceService, it gets no more than an admin allowed.

The critical case first: a Ready Model under a running service, edited to name a node file. The
controller used to plan the service from the new spec next to the old (Ready) status and mount the
file within 0.1 s. Every version of the Deployment is watched: none may ever carry a source that a
Ready status of the Model's *current* spec had not vouched for beforehand (resourceVersions come
from the one etcd of the test cluster, so they order the Model's and the Deployment's versions)."""

from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    API,
    RunningController,
    StatusWatch,
    condition_triple,
    eventually,
    isvc,
    model,
    patch,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
    settled,
    status_of,
)
from tenant_support import Tenant, tenant_in

from llmkube.plan.model.source import SourceKind, classify_source, local_path, parse_pvc_source
from llmkube.testing.rest import KubeRest, RestError

pytestmark = pytest.mark.usefixtures("services_deleted_first")

SOURCE_A = "https://models.invalid/a.gguf"
SOURCE_B = "https://models.invalid/b.gguf"
NODE_FILES = ["/etc/shadow", "/var/lib/kubelet/pki/kubelet-client-current.pem", "/root/.ssh/id_rsa"]


@pytest.fixture
def tenant(operator: RunningController, full_namespace: str, tmp_path: Path) -> Tenant:
    return tenant_in(operator.cluster, full_namespace, tmp_path)


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def edit_source(tenant: Tenant, name: str, source: str) -> int:
    """The tenant's `kubectl patch mdl NAME --type merge -p '{"spec":{"source":...}}'`; the new
    generation."""
    edited = patch(tenant.client, API, "Model", name, tenant.namespace, {"spec": {"source": source}})
    return int(edited["metadata"]["generation"])


async def judged(admin: KubeRest, name: str, namespace: str, generation: int) -> dict[str, Any]:
    """The Model's status once the Model controller has judged this generation."""

    def check() -> dict[str, Any] | None:
        status = status_of(admin, "Model", name, namespace)
        return status if status.get("observedGeneration") == generation else None

    found: dict[str, Any] = await eventually(
        check, within=60, what=f"Model {name} judged at generation {generation}"
    )
    return found


async def caught_up(operator: RunningController, watch: StatusWatch, admin: KubeRest, namespace: str) -> None:
    """The InferenceService controller has nothing left to do, and the watch has seen the
    Deployment as it is now: what the watch holds is every version there was."""
    await settled(operator.controllers.inference_services.controller)
    current = admin.get("apps/v1", "Deployment", watch.name, namespace)["metadata"]["resourceVersion"]
    try:
        await eventually(
            # Seen it: a write after the read may already be there too (resourceVersions are opaque).
            lambda: any(o["metadata"]["resourceVersion"] == current for o in watch.objects),
            within=30,
            what="the Deployment watch at the current version",
        )
    except TimeoutError:
        seen = [o["metadata"]["resourceVersion"] for o in watch.objects]
        raise AssertionError(
            f"watch at {seen[-3:]}, server at {current}, watch error {watch.error!r}"
        ) from None


def sources_used(deployment: dict[str, Any]) -> dict[str, set[str]]:
    """What a Deployment's pods read the model from: host paths, claims, download URLs."""
    pod = deployment["spec"]["template"]["spec"]
    used: dict[str, set[str]] = {"hostPath": set(), "claim": set(), "download": set()}
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            used["hostPath"].add(volume["hostPath"]["path"])
        if volume.get("name") == "model-source":
            used["claim"].add(volume["persistentVolumeClaim"]["claimName"])
    for container in pod.get("initContainers") or []:
        for var in container.get("env") or []:
            if var["name"] == "MODEL_SOURCE":
                used["download"].add(var["value"])
    return used


def vouched_before(model_versions: list[dict[str, Any]], resource_version: int) -> dict[str, set[str]]:
    """What Ready statuses of the Model's current spec had vouched for before `resource_version`."""
    vouched: dict[str, set[str]] = {"hostPath": set(), "claim": set(), "download": set()}
    for version in model_versions:
        status = version.get("status") or {}
        current = status.get("observedGeneration") == version["metadata"]["generation"]
        if int(version["metadata"]["resourceVersion"]) >= resource_version or not current:
            continue
        if status.get("phase") != "Ready":
            continue
        source = version["spec"]["source"]
        kind = classify_source(source)
        if kind is SourceKind.LOCAL:
            vouched["hostPath"].add(local_path(source))
            vouched["download"].add(source)
        elif kind is SourceKind.PVC:
            parsed = parse_pvc_source(source)
            assert parsed is not None
            vouched["claim"].add(parsed.claim)
        else:
            vouched["download"].add(source)
    return vouched


def assert_every_version_was_vouched_for(deployments: StatusWatch, models: StatusWatch) -> None:
    for version in list(deployments.objects):
        rv = int(version["metadata"]["resourceVersion"])
        used, vouched = sources_used(version), vouched_before(list(models.objects), rv)
        for what in used:
            assert used[what] <= vouched[what], (
                f"Deployment version {rv} {what} {used[what] - vouched[what]} was never vouched for by a "
                f"Ready status of the Model's current spec before it"
            )


async def serving(operator: RunningController, tenant: Tenant, name: str) -> tuple[StatusWatch, StatusWatch]:
    admin = operator.cluster.admin()
    tenant.client.create(model(name, source=SOURCE_A), namespace=tenant.namespace)
    tenant.client.create(isvc(name, modelRef=name), namespace=tenant.namespace)
    await eventually(phase_is(admin, "InferenceService", name, tenant.namespace, "Ready"), within=90)
    deployments = StatusWatch(admin, "Deployment", name, tenant.namespace, api_version="apps/v1").start()
    models = StatusWatch(admin, "Model", name, tenant.namespace).start()
    return deployments, models


async def test_a_model_edited_to_node_files_and_other_claims_never_reaches_the_pods(
    operator: RunningController, tenant: Tenant, tmp_path: Path
) -> None:
    admin = operator.cluster.admin()
    ns = tenant.namespace
    admin.create(claim("someone-elses-claim"), namespace=ns)
    inside_roots = tmp_path / "weights.gguf"  # inside --model-local-roots, but this namespace may not
    inside_roots.write_bytes(b"GGUF" + bytes(60))
    deployments, models = await serving(operator, tenant, "flip")
    try:
        flips = [
            *NODE_FILES,
            f"file://{inside_roots}",
            "pvc://no-such-claim/m.gguf",
            "pvc://someone-elses-claim/m.gguf",
            SOURCE_B,
            SOURCE_A,
            "/etc/shadow",
            SOURCE_A,
        ]
        ready: set[str] = set()
        for source in flips:
            generation = edit_source(tenant, "flip", source)
            status = await judged(admin, "flip", ns, generation)
            await caught_up(operator, deployments, admin, ns)
            assert not any(sources_used(d)["hostPath"] for d in deployments.objects), source
            if status.get("phase") == "Ready":
                ready.add(source)
            if classify_source(source) is SourceKind.LOCAL:
                assert status["phase"] == "Failed"
                reason = condition_triple(status, "Degraded")
                assert reason is not None and reason[1] == "InvalidSource", reason
        assert_every_version_was_vouched_for(deployments, models)
        assert "pvc://no-such-claim/m.gguf" not in ready
        # A claim is mounted only if (and after) the Model vouched for it; the service serves A again.
        mounted = set().union(*(sources_used(d)["claim"] for d in deployments.objects))
        assert mounted == ({"someone-elses-claim"} if "pvc://someone-elses-claim/m.gguf" in ready else set())
        final = admin.get("apps/v1", "Deployment", "flip", ns)
        assert sources_used(final) == {"hostPath": set(), "claim": set(), "download": {SOURCE_A}}
    finally:
        deployments.stop()
        models.stop()


@pytest.mark.local_sources
async def test_an_allowed_local_source_is_mounted_only_once_its_model_is_ready(
    operator: RunningController, tenant: Tenant, tmp_path: Path
) -> None:
    """The positive control, in a namespace an admin allowed: the same flips, where a file inside
    the roots is mounted (after its Ready status), and node files outside them still never are."""
    admin = operator.cluster.admin()
    ns = tenant.namespace
    allowed = tmp_path / "allowed.gguf"
    allowed.write_bytes(b"GGUF" + bytes(60))
    deployments, models = await serving(operator, tenant, "local")
    try:
        for source in ["/etc/shadow", f"file://{allowed}", "/root/.ssh/id_rsa", SOURCE_A]:
            generation = edit_source(tenant, "local", source)
            await judged(admin, "local", ns, generation)
            await caught_up(operator, deployments, admin, ns)
        assert_every_version_was_vouched_for(deployments, models)
        mounted = set().union(*(sources_used(d)["hostPath"] for d in deployments.objects))
        assert mounted == {str(allowed)}
    finally:
        deployments.stop()
        models.stop()


# --- what RBAC denied the tenant, asked for through the controller --------------------------------

FORBIDDEN_SPECS = {
    "privileged": ({"securityContext": {"privileged": True}}, "spec.securityContext.privileged"),
    "sys-admin": (
        {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
        "spec.securityContext.capabilities.add",
    ),
    "seccomp-unconfined": (
        {"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}},
        "spec.podSecurityContext.seccompProfile.type",
    ),
    "apparmor-unconfined": (
        {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
        "spec.securityContext.appArmorProfile.type",
    ),
    "node-critical": ({"priorityClassName": "system-node-critical"}, "spec.priorityClassName"),
    "load-balancer": ({"endpoint": {"type": "LoadBalancer"}}, "spec.endpoint.type"),
    "probe-ssrf": (
        {"probeOverrides": {"readiness": {"httpGet": {"host": "169.254.169.254", "path": "/", "port": 80}}}},
        "spec.probeOverrides.readiness",
    ),
    # The v0.9 fields: the same rules, the same status.
    "host-volume": (
        {"extraVolumes": [{"name": "etc", "hostPath": {"path": "/etc"}}]},
        "spec.extraVolumes",
    ),
    "nfs-volume": (
        {"extraVolumes": [{"name": "n", "nfs": {"server": "nfs.example", "path": "/"}}]},
        "spec.extraVolumes[0].nfs",
    ),
    "sa-token": (
        {"extraVolumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]},
        "spec.extraVolumes[0].projected.sources[0].serviceAccountToken",
    ),
    "control-plane": (
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}
                                ]
                            }
                        ]
                    }
                }
            }
        },
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]",
    ),
}


def warnings_for(admin: KubeRest, namespace: str, name: str) -> set[str]:
    return {
        e["reason"]
        for e in admin.list("events.k8s.io/v1", "Event", namespace)
        if e.get("type") == "Warning" and (e.get("regarding") or {}).get("name") == name
    }


async def assert_policy_violation(admin: KubeRest, namespace: str, name: str, field: str) -> str:
    status = await eventually(phase_is(admin, "InferenceService", name, namespace, "Failed"), within=60)
    degraded = condition_triple(status, "Degraded")
    assert degraded is not None and degraded[:2] == ("True", "PolicyViolation"), degraded
    assert degraded[2].startswith(f"{field}"), degraded
    await eventually(
        lambda: "PolicyViolation" in warnings_for(admin, namespace, name), within=30, what="Event"
    )
    assert admin.get_or_none("apps/v1", "Deployment", name, namespace) is None
    assert admin.get_or_none("v1", "Service", name, namespace) is None
    return degraded[2]


async def test_what_rbac_denies_the_tenant_it_does_not_get_through_the_controller(
    operator: RunningController, tenant: Tenant
) -> None:
    admin = operator.cluster.admin()
    ns = tenant.namespace
    tenant.client.create(model("m"), namespace=ns)
    for name, (spec, _) in FORBIDDEN_SPECS.items():
        tenant.client.create(isvc(name, modelRef="m", **spec), namespace=ns)
    for name, (_, field) in FORBIDDEN_SPECS.items():
        await assert_policy_violation(admin, ns, name, field)


async def test_a_running_service_edited_to_privileged_keeps_its_compliant_pods(
    operator: RunningController, tenant: Tenant
) -> None:
    admin = operator.cluster.admin()
    ns = tenant.namespace
    tenant.client.create(model("m"), namespace=ns)
    tenant.client.create(isvc("svc", modelRef="m"), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "svc", ns, "Ready"), within=90)
    before = admin.get("apps/v1", "Deployment", "svc", ns)
    patch(
        tenant.client, API, "InferenceService", "svc", ns, {"spec": {"securityContext": {"privileged": True}}}
    )
    status = await eventually(phase_is(admin, "InferenceService", "svc", ns, "Failed"), within=60)
    assert (condition_triple(status, "Degraded") or ("", "", ""))[1] == "PolicyViolation"
    await settled(operator.controllers.inference_services.controller)
    after = admin.get("apps/v1", "Deployment", "svc", ns)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"] or (
        after["spec"]["template"] == before["spec"]["template"]
    )
    assert "privileged" not in str(after["spec"]["template"]["spec"]["containers"][0].get("securityContext"))


async def test_the_namespace_priority_ceiling(operator: RunningController, tenant: Tenant) -> None:
    admin = operator.cluster.admin()
    ns = tenant.namespace
    patch(
        admin,
        "v1",
        "Namespace",
        ns,
        None,
        {"metadata": {"labels": {"inference.llmkube.dev/max-priority": "normal"}}},
    )
    tenant.client.create(model("m"), namespace=ns)
    tenant.client.create(isvc("critical", modelRef="m", priority="critical"), namespace=ns)
    tenant.client.create(isvc("normal", modelRef="m", priority="normal"), namespace=ns)
    message = await assert_policy_violation(admin, ns, "critical", "spec.priority")
    assert f"namespace '{ns}' allows at most \"normal\"" in message
    await eventually(phase_is(admin, "InferenceService", "normal", ns, "Ready"), within=90)
    # The admin raises the ceiling: the refused service is judged again and runs.
    patch(
        admin,
        "v1",
        "Namespace",
        ns,
        None,
        {"metadata": {"labels": {"inference.llmkube.dev/max-priority": "critical"}}},
    )
    await eventually(phase_is(admin, "InferenceService", "critical", ns, "Ready"), within=90)


async def test_a_resource_quota_on_a_priority_class_is_enforced_and_reported(
    operator: RunningController, tenant: Tenant
) -> None:
    """Kubernetes' own guard for priorities: a ResourceQuota scoped to one of our PriorityClasses
    (here: no pod of class llmkube-high in this namespace). The Deployment is created, its
    ReplicaSet is refused every pod, and the service says so with the API server's message."""
    admin = operator.cluster.admin()
    ns = tenant.namespace
    admin.create(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "no-high-priority"},
            "spec": {
                "hard": {"pods": "0"},
                "scopeSelector": {
                    "matchExpressions": [
                        {"scopeName": "PriorityClass", "operator": "In", "values": ["llmkube-high"]}
                    ]
                },
            },
        },
        namespace=ns,
    )
    tenant.client.create(model("m"), namespace=ns)
    tenant.client.create(isvc("high", modelRef="m", priority="high"), namespace=ns)
    status = await eventually(phase_is(admin, "InferenceService", "high", ns, "Failed"), within=90)
    degraded = condition_triple(status, "Degraded")
    assert degraded is not None and degraded[:2] == ("True", "FailedCreate"), degraded
    assert "exceeded quota: no-high-priority" in degraded[2]
    await eventually(lambda: "FailedCreate" in warnings_for(admin, ns, "high"), within=30, what="Event")
    # The quota goes: the ReplicaSet creates the pod, and the service recovers by itself.
    admin.delete("v1", "ResourceQuota", "no-high-priority", ns)
    await eventually(phase_is(admin, "InferenceService", "high", ns, "Ready"), within=120)


async def test_a_restricted_namespace_runs_the_default_pod_and_refuses_what_it_would_refuse(
    operator: RunningController, tenant: Tenant
) -> None:
    admin = operator.cluster.admin()
    ns = tenant.namespace
    patch(
        admin,
        "v1",
        "Namespace",
        ns,
        None,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    tenant.client.create(model("m"), namespace=ns)
    tenant.client.create(isvc("default", modelRef="m"), namespace=ns)
    tenant.client.create(
        isvc("own-context", modelRef="m", podSecurityContext={"fsGroup": 2000}), namespace=ns
    )
    # The default llama.cpp pod (and its model downloader) meet "restricted": PodSecurity admits them.
    await eventually(phase_is(admin, "InferenceService", "default", ns, "Ready"), within=90)
    message = await assert_policy_violation(admin, ns, "own-context", "spec.podSecurityContext")
    assert "pod-security.kubernetes.io/enforce label" in message and "runAsNonRoot" in message


async def test_the_tenant_cannot_escalate_what_it_already_cannot_do(
    operator: RunningController, tenant: Tenant
) -> None:
    """The premise, checked once more with the tenant's own token: no pods, no Services, no Secrets."""
    for method, path, body in [
        ("POST", f"/api/v1/namespaces/{tenant.namespace}/services", {"apiVersion": "v1", "kind": "Service"}),
        ("GET", f"/api/v1/namespaces/{tenant.namespace}/secrets", None),
        ("POST", f"/apis/apps/v1/namespaces/{tenant.namespace}/deployments", {"apiVersion": "apps/v1"}),
    ]:
        with pytest.raises(RestError) as refused:
            tenant.client.request(method, path, body)
        assert refused.value.status == 403
