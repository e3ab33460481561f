"""manifests/admission on a real API server: every rule rejects a bad InferenceService naming the
field, accepts the good one next to it, and agrees with the controller's own validation on a
shared corpus of mistakes (both reject, same field).

The policy is applied exactly as shipped; only its binding is narrowed to namespaces labelled for
this module, so other tests on the shared API server are not affected.
"""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import KubeRest, RestError, load_yaml_documents

from llmkube.api.crds import all_crds
from llmkube.api.inferenceservice import InferenceService
from llmkube.plan.apiserver.labels import label_value_problem, qualified_name_problem
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.runtimes import resolve_runtime, runtime_defaults
from llmkube.plan.inferenceservice.validation import Issue, ValidationInputs, validate

POLICY = Path(__file__).resolve().parents[2] / "manifests" / "admission" / "inferenceservice_policy.yaml"
API = "inference.llmkube.dev/v1alpha1"
SCOPE_LABEL = "llmkube-test/admission-policy"


def service(name: str = "svc", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {"modelRef": "m", **spec},
    }


@pytest.fixture(scope="module")
def policy_installed(api_cluster: ClusterHandle) -> Iterator[ClusterHandle]:
    apply_manifests(api_cluster, all_crds())
    docs = load_yaml_documents(POLICY)
    binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding")
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {SCOPE_LABEL: "on"}}}
    admin = api_cluster.admin()
    for doc in docs:
        admin.apply(doc)
    yield api_cluster
    for doc in reversed(docs):
        admin.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])


@pytest.fixture
def scoped(policy_installed: ClusterHandle, namespace: str) -> str:
    """A namespace the policy applies to, once the API server enforces it (policies take effect
    asynchronously: poll with a known-bad object)."""
    admin = policy_installed.admin()
    admin.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        {"metadata": {"labels": {SCOPE_LABEL: "on"}}},
        content_type="application/merge-patch+json",
    )
    deadline = time.monotonic() + 30
    probe = service("probe", resources={"cpu": "two"})
    while True:
        try:
            admin.create(probe, namespace=namespace)
        except RestError as refused:
            if refused.status == 422:
                return namespace
            raise
        admin.delete(API, "InferenceService", "probe", namespace)
        if time.monotonic() > deadline:
            raise TimeoutError("the admission policy is not enforced after 30s")
        time.sleep(0.2)


def rejection(admin: KubeRest, obj: dict[str, Any], namespace: str) -> tuple[str, str]:
    """(field, message) of the API server's refusal; fails the test if it was accepted. A policy
    validation has no field of its own in the API's answer, so every message of ours starts with
    the field it is about, "<field>: <problem>", the form the controller's messages have too."""
    try:
        admin.create(obj, namespace=namespace)
    except RestError as refused:
        assert refused.status == 422, refused
        assert isinstance(refused.body, dict)
        assert refused.body.get("reason") == "Invalid"
        message = str(refused.body.get("message", ""))
        _, marker, problem = message.partition("denied request: ")
        assert marker, message
        return problem.split(": ", 1)[0], problem
    admin.delete(API, "InferenceService", obj["metadata"]["name"], namespace)
    raise AssertionError(f"accepted: {obj['spec']}")


LONG = "n" * 64

# (id, bad object, the good object beside it, the field the policy names, words of its message)
RULES: list[tuple[str, dict[str, Any], dict[str, Any], str, str]] = [
    ("name-too-long", service(LONG), service("n" * 63), "metadata.name", "is 64 characters"),
    ("modelRef-too-long", service(modelRef=LONG), service(modelRef="m" * 63), "spec.modelRef", "at most 63"),
    (
        "cpu",
        service(resources={"cpu": "two"}),
        service(resources={"cpu": "500m"}),
        "spec.resources.cpu",
        'spec.resources.cpu: invalid quantity "two" (for example 500m, 2, 4Gi)',
    ),
    (
        "memory-negative",
        service(resources={"memory": "-1Gi"}),
        service(resources={"memory": "1Gi"}),
        "spec.resources.memory",
        'invalid quantity "-1Gi"',
    ),
    (
        "hostMemory",
        service(resources={"hostMemory": "lots"}),
        service(resources={"hostMemory": "64Gi"}),
        "spec.resources.hostMemory",
        'invalid quantity "lots"',
    ),
    (
        "gpuMemory",
        service(resources={"gpuMemory": "24 GB"}),
        service(resources={"gpuMemory": "24G"}),
        "spec.resources.gpuMemory",
        'invalid quantity "24 GB"',
    ),
    (
        "generic-without-image",
        service(runtime="generic"),
        service(runtime="generic", image="my/server:1"),
        "spec.image",
        'required for runtime "generic"',
    ),
    (
        "personaplex-without-image",
        service(runtime="personaplex", image=""),
        service(runtime="personaplex", image="my/personaplex:1"),
        "spec.image",
        'required for runtime "personaplex"',
    ),
    (
        "min-over-max",
        service(autoscaling={"minReplicas": 5, "maxReplicas": 2}),
        service(autoscaling={"minReplicas": 2, "maxReplicas": 2}),
        "spec.autoscaling.minReplicas",
        "minReplicas 5 is greater than maxReplicas 2",
    ),
    (
        "metric-quantity",
        service(
            autoscaling={
                "maxReplicas": 3,
                "metrics": [{"name": "q", "type": "Pods", "targetAverageValue": "x"}],
            }
        ),
        service(
            autoscaling={
                "maxReplicas": 3,
                "metrics": [{"name": "q", "type": "Pods", "targetAverageValue": "2"}],
            }
        ),
        "spec.autoscaling.metrics",
        "targetAverageValue",
    ),
    (
        "pods-metric-without-target",
        service(autoscaling={"maxReplicas": 3, "metrics": [{"name": "q", "type": "Pods"}]}),
        service(
            autoscaling={
                "maxReplicas": 3,
                "metrics": [{"name": "cpu", "type": "Resource", "targetAverageUtilization": 80}],
            }
        ),
        "spec.autoscaling.metrics",
        "targetAverageValue",
    ),
    (
        "podLabels-key",
        service(podLabels={"team name": "ml"}),
        service(podLabels={"example.com/team": "ml"}),
        "spec.podLabels",
        "label key",
    ),
    (
        "podLabels-value",
        service(podLabels={"team": "machine learning"}),
        service(podLabels={"team": "machine-learning", "empty": ""}),
        "spec.podLabels",
        "label value",
    ),
    (
        "nodeSelector",
        service(nodeSelector={"gpu/type/x": "a100"}),
        service(nodeSelector={"nvidia.com/gpu.product": "A100-SXM4-80GB"}),
        "spec.nodeSelector",
        "label key",
    ),
    (
        "podAnnotations-key",
        service(podAnnotations={"-bad": "any value at all, spaces too"}),
        service(podAnnotations={"prometheus.io/scrape": "any value at all, spaces too"}),
        "spec.podAnnotations",
        "annotation key",
    ),
]


@pytest.mark.parametrize(("bad", "good", "field", "words"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_each_rule_rejects_naming_the_field_and_accepts_the_good_one(
    policy_installed: ClusterHandle,
    scoped: str,
    bad: dict[str, Any],
    good: dict[str, Any],
    field: str,
    words: str,
) -> None:
    admin = policy_installed.admin()
    rejected_field, message = rejection(admin, bad, scoped)
    assert rejected_field == field
    assert words in message
    admin.create(good, namespace=scoped)


def planner_errors(obj: dict[str, Any]) -> list[Issue]:
    """What the controller's validation says of the same object (a Ready, non-metal model)."""
    isvc = InferenceService.model_validate({**obj, "metadata": {**obj["metadata"], "namespace": "ns"}})
    runtime = runtime_defaults(resolve_runtime(isvc.spec))
    inputs = ValidationInputs(
        isvc=isvc,
        runtime=runtime,
        gpu_count=0,
        metal=False,
        priority_class_name="llmkube-normal",
        priority_class_exists=True,
        uses_cache_pvc=False,
        config=OperatorConfig(),
    )
    return [issue for issue in validate(inputs) if issue.severity == "error"]


@pytest.mark.parametrize(("bad", "field"), [(r[1], r[3]) for r in RULES], ids=[r[0] for r in RULES])
def test_the_policy_and_the_controller_reject_the_same_field(
    policy_installed: ClusterHandle, scoped: str, bad: dict[str, Any], field: str
) -> None:
    policy_field, _ = rejection(policy_installed.admin(), bad, scoped)
    fields = [issue.field for issue in planner_errors(bad)]
    assert any(f == policy_field or f.startswith(f"{policy_field}[") for f in fields), (policy_field, fields)


@pytest.mark.parametrize(("good",), [(r[2],) for r in RULES], ids=[r[0] for r in RULES])
def test_what_the_policy_accepts_the_controller_accepts(good: dict[str, Any]) -> None:
    assert planner_errors(good) == []


def test_metadata_changes_of_an_object_stored_before_the_policy_still_go_through(
    policy_installed: ClusterHandle, namespace: str
) -> None:
    admin = policy_installed.admin()
    stored = admin.create(service("old", resources={"cpu": "two"}), namespace=namespace)
    assert stored["spec"]["resources"]["cpu"] == "two"  # the namespace is not in scope yet
    admin.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        {"metadata": {"labels": {SCOPE_LABEL: "on"}}},
        content_type="application/merge-patch+json",
    )
    path = admin.path_for(API, "InferenceService", namespace, "old")
    merge = "application/merge-patch+json"
    deadline = time.monotonic() + 30
    while True:  # wait until a spec change is judged
        try:
            admin.request("PATCH", path, {"spec": {"resources": {"cpu": "three"}}}, content_type=merge)
        except RestError as refused:
            assert refused.status == 422
            break
        assert time.monotonic() < deadline, "the policy is not enforced after 30s"
        time.sleep(0.2)
    labelled = admin.request("PATCH", path, {"metadata": {"labels": {"team": "ml"}}}, content_type=merge)
    assert labelled["metadata"]["labels"] == {"team": "ml"}
    fixed = admin.request("PATCH", path, {"spec": {"resources": {"cpu": "2"}}}, content_type=merge)
    assert fixed["spec"]["resources"]["cpu"] == "2"


LABEL_TEXT = st.text(alphabet="abcXYZ019-_./ é:", min_size=0, max_size=70) | st.sampled_from(
    ["a" * 63, "a" * 64, "example.com/" + "a" * 63, "Example.com/a", "a/b/c", "/a", "a/", "-a", "a-", "a.b_c"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=LABEL_TEXT, value=LABEL_TEXT)
def test_label_syntax_agrees_with_the_api_server(api_cluster: ClusterHandle, key: str, value: str) -> None:
    """The controller's label checks (plan/apiserver/labels.py) accept exactly what the API server accepts as
    a label (asked with a server-side dry run of a ConfigMap carrying it)."""
    ours = qualified_name_problem(key) is None and label_value_problem(value) is None
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "label-probe", "namespace": "default", "labels": {key: value}},
    }
    try:
        api_cluster.admin().request(
            "POST", "/api/v1/namespaces/default/configmaps", config_map, query={"dryRun": "All"}
        )
        theirs = True
    except RestError as refused:
        assert refused.status == 422, refused
        theirs = False
    assert ours == theirs, (key, value, qualified_name_problem(key), label_value_problem(value))
