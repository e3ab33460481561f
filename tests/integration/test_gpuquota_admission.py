"""manifests/admission/gpuquota_policy.yaml on a real API server: a GPUQuota with both or neither of
namespaceRef and selector, or a negative count, is refused at apply naming the same field and
problem as the controller's own validation (llmkube/plan/quota/validation.py); good quotas, our
sample and the reference's own examples (tests/unit/api/reference_gpuquota_samples.yaml) apply
unchanged and are stored with every field they set.

The policy is applied exactly as shipped; only its binding is narrowed to namespaces labelled for
this module, so other tests on the shared API server are not affected."""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import KubeRest, RestError, load_yaml_documents

from llmkube.api.crds import all_crds
from llmkube.plan.quota.validation import quota_issues

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "manifests" / "admission" / "gpuquota_policy.yaml"
SAMPLE = ROOT / "manifests" / "samples" / "gpuquota" / "team-quotas.yaml"
REFERENCE = ROOT / "tests" / "unit" / "api" / "reference_gpuquota_samples.yaml"
API = "inference.llmkube.dev/v1alpha1"
SCOPE_LABEL = "llmkube-test/gpuquota-policy"


def quota(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "GPUQuota", "metadata": {"name": name}, "spec": spec}


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


def _label(admin: KubeRest, namespace: str, value: str | None) -> None:
    admin.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        {"metadata": {"labels": {SCOPE_LABEL: value}}},
        content_type="application/merge-patch+json",
    )


def _enforced(admin: KubeRest, namespace: str) -> None:
    """Policies take effect asynchronously: poll with a known-bad object."""
    probe = quota("probe", {"gpuCount": 1})
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create(probe, namespace=namespace)
        except RestError as refused:
            if refused.status == 422:
                return
            raise
        admin.delete(API, "GPUQuota", "probe", namespace)
        if time.monotonic() > deadline:
            raise TimeoutError("the admission policy is not enforced after 30s")
        time.sleep(0.2)


@pytest.fixture
def scoped(policy_installed: ClusterHandle, namespace: str) -> str:
    admin = policy_installed.admin()
    _label(admin, namespace, "on")
    _enforced(admin, namespace)
    return namespace


def outcome(admin: KubeRest, obj: dict[str, Any], namespace: str) -> str | None:
    """The refusal's text after "denied request: ", or None when the API server accepted the object
    (then it is read back: every field it set is stored)."""
    try:
        admin.create(obj, namespace=namespace)
    except RestError as refused:
        assert refused.status == 422, refused
        assert isinstance(refused.body, dict) and refused.body.get("reason") == "Invalid"
        message = str(refused.body.get("message", ""))
        _, marker, problem = message.partition("denied request: ")
        assert marker, message
        return problem
    stored = admin.get(API, "GPUQuota", obj["metadata"]["name"], namespace)
    assert stored["spec"] == obj["spec"]
    admin.delete(API, "GPUQuota", obj["metadata"]["name"], namespace)
    return None


BAD: dict[str, dict[str, Any]] = {
    "both": {"namespaceRef": "a", "selector": {"matchLabels": {"team": "a"}}, "gpuCount": 1},
    "neither": {"gpuCount": 1},
    "empty namespaceRef and no selector": {"namespaceRef": "", "gpuCount": 1},
    "negative gpuCount": {"namespaceRef": "a", "gpuCount": -1},
    "negative vramBytes": {"namespaceRef": "a", "gpuCount": 1, "vramBytes": -1},
}


@pytest.mark.parametrize("case", BAD)
def test_invalid_quotas_are_refused_as_the_controller_says(
    case: str, policy_installed: ClusterHandle, scoped: str
) -> None:
    spec = BAD[case]
    issues = quota_issues(spec)
    assert len(issues) == 1
    field, problem = issues[0]
    refused = outcome(policy_installed.admin(), quota("bad", spec), scoped)
    assert refused == f"{field}: {problem}"


GOOD: dict[str, dict[str, Any]] = {
    "namespaceRef": {"namespaceRef": "a", "gpuCount": 8, "vramBytes": 0},
    "selector": {"selector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}, "gpuCount": 0},
    "everything": {
        "namespaceRef": "a",
        "gpuCount": 8,
        "vramBytes": 17179869184,
        "minPriority": "high",
        "costBudgetRef": "later",
    },
}


@pytest.mark.parametrize("case", GOOD)
def test_good_quotas_apply(case: str, policy_installed: ClusterHandle, scoped: str) -> None:
    spec = GOOD[case]
    assert quota_issues(spec) == []
    assert outcome(policy_installed.admin(), quota("good", spec), scoped) is None


def test_our_sample_applies(policy_installed: ClusterHandle, scoped: str) -> None:
    admin = policy_installed.admin()
    for doc in load_yaml_documents(SAMPLE):
        doc["metadata"]["namespace"] = scoped
        assert outcome(admin, doc, scoped) is None


def test_the_reference_examples_apply_unchanged(policy_installed: ClusterHandle) -> None:
    """Into the namespaces they name (the one without a namespace into team-alpha, where
    `kubectl apply -n team-alpha` puts it), with the policy enforced there."""
    admin = policy_installed.admin()
    docs = load_yaml_documents(REFERENCE)
    assert len(docs) == 3
    try:
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-alpha"}})
    except RestError as exists:
        assert exists.status == 409
    for namespace in ("team-alpha", "kube-system"):
        _label(admin, namespace, "on")
        _enforced(admin, namespace)
    try:
        for doc in docs:
            namespace = doc["metadata"].get("namespace", "team-alpha")
            assert quota_issues(doc["spec"]) == []
            assert outcome(admin, doc, namespace) is None
    finally:
        _label(admin, "kube-system", None)
