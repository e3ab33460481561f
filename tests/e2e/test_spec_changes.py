"""Spec changes reach the owned objects, the Service and the Deployment's own labels included: args,
env, resources, endpoint port and type, pod labels and annotations removed; other managers'
annotations (`kubectl rollout restart`) survive our applies; fields we own edited by hand are put
back."""

from typing import Any

import pytest
from e2e_support import (
    API,
    STRATEGIC,
    RunningController,
    eventually,
    eventually_equal,
    hf_model,
    isvc,
    patch,
    patch_isvc,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
    status_of,
)

pytestmark = pytest.mark.usefixtures("services_deleted_first")

IMAGE = "registry.invalid/inference-server:1"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def deployment(admin: Any, ns: str) -> dict[str, Any]:
    return admin.get("apps/v1", "Deployment", "gen", ns)  # type: ignore[no-any-return]


def container(admin: Any, ns: str) -> dict[str, Any]:
    (only,) = deployment(admin, ns)["spec"]["template"]["spec"]["containers"]
    return only  # type: ignore[no-any-return]


def template_metadata(admin: Any, ns: str) -> dict[str, Any]:
    return deployment(admin, ns)["spec"]["template"]["metadata"]  # type: ignore[no-any-return]


def service_spec(admin: Any, ns: str) -> tuple[str, list[dict[str, Any]]]:
    spec = admin.get("v1", "Service", "gen", ns)["spec"]
    ports = [{k: p[k] for k in ("name", "port", "targetPort", "protocol")} for p in spec["ports"]]
    return spec["type"], ports


def http_port(port: int) -> list[dict[str, Any]]:
    return [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}]


async def test_a_hand_changed_service_port_is_restored(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("gen", modelRef="m", skipModelInit=True), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "gen", ns, "Ready"), what="gen Ready")
    edit = {"spec": {"ports": http_port(1234)}}  # a JSON merge patch replaces the whole list
    patch(admin, "v1", "Service", "gen", ns, edit, field_manager="kubectl-edit")
    await eventually_equal(
        lambda: service_spec(admin, ns), ("ClusterIP", http_port(8080)), what="port restored"
    )
    await eventually(phase_is(admin, "InferenceService", "gen", ns, "Ready"), what="gen still Ready")


async def test_spec_changes_reach_the_owned_objects(operator: RunningController, full_namespace: str) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(
        isvc(
            "gen",
            modelRef="m",
            runtime="generic",
            image=IMAGE,
            args=["--a", "1"],
            env=[{"name": "A", "value": "1"}],
            resources={"cpu": "1", "memory": "1Gi"},
            endpoint={"port": 8080, "type": "ClusterIP"},
            podLabels={"team": "search", "tier": "gold"},
            podAnnotations={"prometheus.io/scrape": "true"},
        ),
        namespace=ns,
    )
    await eventually(phase_is(admin, "InferenceService", "gen", ns, "Ready"), what="gen Ready")
    first = container(admin, ns)
    assert (first["name"], first["image"], first["args"]) == ("inference-server", IMAGE, ["--a", "1"])
    assert first["env"] == [{"name": "A", "value": "1"}]
    assert first["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert service_spec(admin, ns) == ("ClusterIP", http_port(8080))

    # args (the generic runtime passes them through)
    patch_isvc(admin, "gen", ns, {"args": ["--b", "2", "--verbose"]})
    await eventually_equal(lambda: container(admin, ns)["args"], ["--b", "2", "--verbose"], what="args")

    # env: changed and added
    patch_isvc(admin, "gen", ns, {"env": [{"name": "A", "value": "2"}, {"name": "B", "value": "x"}]})
    await eventually_equal(
        lambda: container(admin, ns)["env"],
        [{"name": "A", "value": "2"}, {"name": "B", "value": "x"}],
        what="env",
    )

    # cpu/memory requests; the memory limit follows the request (plan/inferenceservice/hardening.py),
    # cpu has none
    patch_isvc(admin, "gen", ns, {"resources": {"cpu": "2", "memory": "2Gi"}})
    await eventually_equal(
        lambda: container(admin, ns)["resources"],
        {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},  # limit = request
        what="resources",
    )

    # endpoint: the Service's port and type follow, so do the container port and the URL
    patch_isvc(admin, "gen", ns, {"endpoint": {"port": 9090, "type": "NodePort"}})
    await eventually_equal(lambda: service_spec(admin, ns), ("NodePort", http_port(9090)), what="Service")
    assert container(admin, ns)["ports"] == [{"name": "http", "containerPort": 9090, "protocol": "TCP"}]
    url = f"http://gen.{ns}.svc.cluster.local:9090/v1/chat/completions"
    await eventually_equal(
        lambda: status_of(admin, "InferenceService", "gen", ns).get("endpoint"), url, what="status URL"
    )
    patch_isvc(admin, "gen", ns, {"endpoint": {"port": 9090, "type": "ClusterIP"}})
    await eventually_equal(lambda: service_spec(admin, ns), ("ClusterIP", http_port(9090)), what="ClusterIP")

    # `kubectl rollout restart` writes an annotation on the pod template with its own manager...
    stamp = "2026-01-01T00:00:00Z"
    patch(
        admin,
        "apps/v1",
        "Deployment",
        "gen",
        ns,
        {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}},
        field_manager="kubectl-rollout",
    )
    # ...then a label and an annotation are removed from the spec and we apply again.
    patch_isvc(admin, "gen", ns, {"podLabels": {"tier": None}, "podAnnotations": None})  # merge patch
    assert admin.get(API, "InferenceService", "gen", ns)["spec"]["podLabels"] == {"team": "search"}

    def labels_and_annotations() -> tuple[dict[str, str], dict[str, str]]:
        meta = template_metadata(admin, ns)
        return meta.get("labels") or {}, meta.get("annotations") or {}

    await eventually_equal(
        labels_and_annotations,
        (
            {
                "team": "search",
                "app": "gen",
                "inference.llmkube.dev/model": "m",
                "inference.llmkube.dev/service": "gen",
                "inference.llmkube.dev/runtime": "generic",
            },
            {RESTARTED_AT: stamp},  # theirs stays; ours (prometheus.io/scrape) is gone
        ),
        what="pod template labels and annotations",
    )

    # Fields we own, edited by hand, are put back.
    patch(
        admin,
        "apps/v1",
        "Deployment",
        "gen",
        ns,
        {"spec": {"template": {"spec": {"containers": [{"name": "inference-server", "image": "evil:1"}]}}}},
        content_type=STRATEGIC,
        field_manager="kubectl-edit",
    )
    # Changing our entry's targetPort and the type (strategic merge patch, as `kubectl edit` does).
    edit = {"spec": {"type": "NodePort", "ports": [{"port": 9090, "protocol": "TCP", "targetPort": 1234}]}}
    patch(admin, "v1", "Service", "gen", ns, edit, content_type=STRATEGIC, field_manager="kubectl-edit")
    await eventually_equal(lambda: container(admin, ns)["image"], IMAGE, what="image restored")
    await eventually_equal(
        lambda: service_spec(admin, ns), ("ClusterIP", http_port(9090)), what="Service restored"
    )
    # Everything else survived all of this.
    final = container(admin, ns)
    assert final["args"] == ["--b", "2", "--verbose"]
    assert final["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "x"}]
    assert template_metadata(admin, ns)["annotations"] == {RESTARTED_AT: stamp}
    await eventually(phase_is(admin, "InferenceService", "gen", ns, "Ready"), what="gen Ready at the end")


async def test_changing_the_model_reference_rolls_the_labels_but_keeps_the_selector(
    operator: RunningController, full_namespace: str
) -> None:
    """modelRef is mutable: the selector holds no model label; the model label is refreshed on the
    Deployment itself too."""
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("first"), namespace=ns)
    admin.create(hf_model("second"), namespace=ns)
    admin.create(isvc("gen", modelRef="first", skipModelInit=True), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "gen", ns, "Ready"), what="gen Ready")
    uid = deployment(admin, ns)["metadata"]["uid"]
    patch_isvc(admin, "gen", ns, {"modelRef": "second"})

    def model_labels() -> tuple[str, str]:
        current = deployment(admin, ns)
        return (
            current["metadata"]["labels"]["inference.llmkube.dev/model"],
            current["spec"]["template"]["metadata"]["labels"]["inference.llmkube.dev/model"],
        )

    await eventually_equal(model_labels, ("second", "second"), what="model labels")
    current = deployment(admin, ns)
    assert current["metadata"]["uid"] == uid  # updated in place, not recreated
    assert current["spec"]["selector"] == {
        "matchLabels": {"app": "gen", "inference.llmkube.dev/service": "gen"}
    }
    await eventually(phase_is(admin, "InferenceService", "gen", ns, "Ready"), what="gen Ready on second")
