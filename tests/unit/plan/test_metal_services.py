"""The metal Services the host agents may write EndpointSlices for (plan/inferenceservice/
metal_services.py): which of the controller's Services are listed, with which uid, and the ConfigMap
the admission policy reads. The Services are the planner's own (a metal plan and a CPU plan), as the
API server stores them."""

import re
from typing import Any

import pytest
from isvc_factories import UID, make_isvc, make_model
from isvc_planning import plan

from llmkube.plan.inferenceservice.metal_services import (
    METAL_SERVICES_CONFIGMAP,
    metal_service_key,
    metal_services,
    metal_services_configmap,
)
from llmkube.plan.inferenceservice.service import service_intent

METAL = make_model(hardware={"accelerator": "metal"})
CPU = make_model()
SERVICE_UID = "0f5e0d4a-0000-4000-8000-00000000beef"
DELETING = "2026-03-01T12:00:00Z"


def stored(obj: dict[str, Any], uid: str = SERVICE_UID, **meta: Any) -> dict[str, Any]:
    """As the API server returns it: with a uid (and whatever else the test adds)."""
    return {**obj, "metadata": {**obj["metadata"], "uid": uid, **meta}}


def planned_service(model: Any = METAL, *, name: str = "demo", namespace: str = "ai") -> dict[str, Any]:
    service = plan(isvc=make_isvc(name=name, namespace=namespace), model=model).service
    assert service is not None
    return stored(service, uid=f"{namespace}-{name}-service")


def isvc_object(name: str = "demo", namespace: str = "ai", uid: str = UID, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, **meta},
        "spec": {"modelRef": "tiny"},
    }


def owners(*isvcs: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in isvcs}


def with_meta(service: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**service, "metadata": {**service["metadata"], **changes}}


def metal() -> dict[str, Any]:
    return planned_service(METAL)


LISTED = {"ai.demo": "ai-demo-service"}

CASES: list[tuple[str, list[dict[str, Any]], dict[tuple[str, str], dict[str, Any]], dict[str, str]]] = [
    ("a metal service's Service", [metal()], owners(isvc_object()), LISTED),
    ("a CPU service's Service has a selector", [planned_service(CPU)], owners(isvc_object()), {}),
    (
        "an empty selector selects nothing either",
        [{**metal(), "spec": {**metal()["spec"], "selector": {}}}],
        owners(isvc_object()),
        LISTED,
    ),
    (
        "the Service is being deleted",
        [with_meta(metal(), deletionTimestamp=DELETING)],
        owners(isvc_object()),
        {},
    ),
    (
        "its InferenceService is being deleted",
        [metal()],
        owners(isvc_object(deletionTimestamp=DELETING)),
        {},
    ),
    ("its InferenceService is gone", [metal()], {}, {}),
    (
        "its InferenceService was deleted and made again under the name",
        [metal()],
        owners(isvc_object(uid="a-new-uid")),
        {},
    ),
    (
        "someone else's Service, without llmkube's label",
        [with_meta(metal(), labels={"app": "demo"})],
        owners(isvc_object()),
        {},
    ),
    (
        "a Service with llmkube's label that no InferenceService controls",
        [with_meta(metal(), ownerReferences=[])],
        owners(isvc_object()),
        {},
    ),
    (
        "owned, but not controlled, by the InferenceService",
        [
            with_meta(
                metal(),
                ownerReferences=[{**metal()["metadata"]["ownerReferences"][0], "controller": False}],
            )
        ],
        owners(isvc_object()),
        {},
    ),
    (
        "a ModelRouter's Service",
        [
            with_meta(
                metal(),
                ownerReferences=[
                    {
                        "apiVersion": "inference.llmkube.dev/v1alpha1",
                        "kind": "ModelRouter",
                        "name": "demo",
                        "uid": UID,
                        "controller": True,
                    }
                ],
            )
        ],
        owners(isvc_object()),
        {},
    ),
    (
        "controlled by the InferenceService, but not named as its Service",
        [with_meta(metal(), name="kube-dns")],
        owners(isvc_object()),
        {},
    ),
    ("a Service without a uid", [with_meta(metal(), uid="")], owners(isvc_object()), {}),
    (
        "an InferenceService with dots in its name: its Service has dashes",
        [planned_service(METAL, name="llama.3")],
        owners(isvc_object(name="llama.3")),
        {"ai.llama-3": "ai-llama.3-service"},
    ),
    (
        "the same name in two namespaces, sorted",
        [planned_service(METAL, namespace="team-b"), metal(), planned_service(CPU, name="web")],
        owners(isvc_object(), isvc_object(namespace="team-b"), isvc_object(name="web")),
        {"ai.demo": "ai-demo-service", "team-b.demo": "team-b-demo-service"},
    ),
]


@pytest.mark.parametrize(("services", "isvcs", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_which_services_are_listed(
    services: list[dict[str, Any]], isvcs: dict[tuple[str, str], dict[str, Any]], expected: dict[str, str]
) -> None:
    listed = metal_services(services, isvcs)
    assert listed == expected
    assert list(listed) == sorted(listed)


def test_a_service_follows_its_model_in_and_out_of_the_list() -> None:
    """Transitions: the planner's Service of one InferenceService as its Model turns metal, back to
    CPU, and the InferenceService goes."""
    isvcs = owners(isvc_object())
    steps = [
        (CPU, isvcs, {}),
        (METAL, isvcs, LISTED),
        (CPU, isvcs, {}),
        (METAL, isvcs, LISTED),
        (METAL, owners(isvc_object(deletionTimestamp=DELETING)), {}),
        (METAL, {}, {}),
    ]
    for model, present, expected in steps:
        assert metal_services([planned_service(model)], present) == expected, model.spec.hardware


def test_a_held_drain_keeps_a_selector() -> None:
    """A Recreate drain points the Service at no pod with a selector (drain.py): still not metal."""
    held = stored(service_intent(make_isvc(), hold=True))
    assert held["spec"]["selector"]
    assert metal_services([held], owners(isvc_object())) == {}


def test_the_keys_are_configmap_keys_for_the_longest_names() -> None:
    """Namespace and Service names are DNS labels (at most 63, no dots): `<namespace>.<service>`
    is a valid ConfigMap key and splits one way only."""
    namespace, name = "n" * 63, "s-" * 31 + "s"
    key = metal_service_key(namespace, name)
    assert re.fullmatch(r"[-._a-zA-Z0-9]+", key) and len(key) <= 253
    assert key.split(".") == [namespace, name]


def test_no_metal_service_and_no_configmap_writes_nothing() -> None:
    assert metal_services_configmap("llmkube-system", {}, exists=False) is None


def test_the_configmap_lists_the_services() -> None:
    configmap = metal_services_configmap("llmkube-system", LISTED, exists=False)
    assert configmap is not None
    assert configmap["metadata"]["name"] == METAL_SERVICES_CONFIGMAP == "llmkube-metal-services"
    assert configmap["metadata"]["namespace"] == "llmkube-system"
    assert configmap["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "llmkube"
    assert "kubernetes.io/description" in configmap["metadata"]["annotations"]
    assert configmap["data"] == LISTED


def test_the_last_service_gone_empties_the_configmap_it_keeps() -> None:
    configmap = metal_services_configmap("llmkube-system", {}, exists=True)
    assert configmap is not None and "data" not in configmap
