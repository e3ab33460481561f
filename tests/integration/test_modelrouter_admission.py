"""manifests/admission/modelrouter_policy.yaml on a real API server: every mistake it covers is
refused at apply naming the same field as the controller's own validation (a shared corpus,
tests/router_bad_specs.py); the corpus's other mistakes are accepted (the controller reports them in
status); good specs, our sample among them, apply.

The policy is applied exactly as shipped; only its binding is narrowed to namespaces labelled for
this module, so other tests on the shared API server are not affected."""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import KubeRest, RestError, load_yaml_documents
from router_bad_specs import CORPUS, POLICY_CASES, BadRouter

from llmkube.api.crds import all_crds
from llmkube.plan.router.validation import errors, validate

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "manifests" / "admission" / "modelrouter_policy.yaml"
SAMPLE = ROOT / "manifests" / "samples" / "router" / "coding-router.yaml"
API = "inference.llmkube.dev/v1alpha1"
SCOPE_LABEL = "llmkube-test/modelrouter-policy"


def router(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ModelRouter", "metadata": {"name": name}, "spec": spec}


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
    probe = router(
        "probe", {"backends": [{"name": "a", "inferenceServiceRef": {"name": "a"}}], "defaultRoute": "x"}
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create(probe, namespace=namespace)
        except RestError as refused:
            if refused.status == 422:
                return namespace
            raise
        admin.delete(API, "ModelRouter", "probe", namespace)
        if time.monotonic() > deadline:
            raise TimeoutError("the admission policy is not enforced after 30s")
        time.sleep(0.2)


def outcome(admin: KubeRest, obj: dict[str, Any], namespace: str) -> str | None:
    """The field the API server's refusal names, or None when it accepted the object."""
    try:
        admin.create(obj, namespace=namespace)
    except RestError as refused:
        assert refused.status == 422, refused
        assert isinstance(refused.body, dict) and refused.body.get("reason") == "Invalid"
        message = str(refused.body.get("message", ""))
        _, marker, problem = message.partition("denied request: ")
        assert marker, message
        return problem.split(": ", 1)[0]
    admin.delete(API, "ModelRouter", obj["metadata"]["name"], namespace)
    return None


def test_the_policy_cases_are_in_the_corpus() -> None:
    assert {case.case for case in CORPUS} >= POLICY_CASES


@pytest.mark.parametrize("case", [c for c in CORPUS if c.severity == "error"], ids=lambda c: c.case)
def test_the_policy_refuses_what_it_covers_naming_the_controllers_field(
    case: BadRouter, policy_installed: ClusterHandle, scoped: str
) -> None:
    assert any(issue.text().startswith(case.text) for issue in errors(validate(case.spec, case.name)))
    refused = outcome(policy_installed.admin(), router(case.name, case.spec), scoped)
    if case.admission:
        assert refused == case.field
    else:
        assert refused is None  # the schema takes it; the controller reports it in status


def test_good_specs_and_the_sample_apply(policy_installed: ClusterHandle, scoped: str) -> None:
    admin = policy_installed.admin()
    sample = next(d for d in load_yaml_documents(SAMPLE) if d["kind"] == "ModelRouter")
    assert outcome(admin, sample, scoped) is None
    good = {
        "backends": [
            {"name": "a", "inferenceServiceRef": {"name": "a"}},
            {"name": "b", "external": {"provider": "openai", "model": "m"}},
        ],
        "rules": [
            {
                "name": "pii",
                "match": {"dataClassification": ["PII"]},
                "failClosed": True,
                "route": {"backends": ["a"]},
            },
            {"name": "rest", "route": {"backends": ["b", "a"], "strategy": "weighted"}},
        ],
        "defaultRoute": "b",
    }
    assert outcome(admin, router("good", good), scoped) is None
