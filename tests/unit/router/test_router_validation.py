"""What the schema cannot say about a ModelRouter, reported naming the field (tests/router_bad_specs.py,
the corpus the admission policy is held to as well); good specs, the reference's sample among them,
have no issue."""

from pathlib import Path
from typing import Any

import pytest
import yaml
from router_bad_specs import CORPUS, BadRouter

from llmkube.plan.router.validation import MAX_ROUTER_NAME, errors, validate

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("bad", CORPUS, ids=[b.case for b in CORPUS])
def test_each_mistake_is_reported_naming_the_field(bad: BadRouter) -> None:
    issues = validate(bad.spec, bad.name)
    assert [(i.field, i.severity) for i in issues] == [(bad.field, bad.severity)], [i.text() for i in issues]
    assert issues[0].text().startswith(bad.text), issues[0].text()


def _routers() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in [
        *sorted((ROOT / "manifests" / "samples" / "router").glob("*.yaml")),
        ROOT / "tests" / "unit" / "api" / "reference_modelrouter_sample.yaml",
    ]:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "ModelRouter":
                found.append((f"{path.stem}/{doc['metadata']['name']}", doc))
    return found


@pytest.mark.parametrize(("case", "doc"), _routers(), ids=[c for c, _ in _routers()])
def test_the_samples_are_valid(case: str, doc: dict[str, Any]) -> None:
    assert validate(doc["spec"], doc["metadata"]["name"]) == []


def test_a_name_of_the_longest_length_is_fine() -> None:
    spec = {"backends": [{"name": "a", "inferenceServiceRef": {"name": "a"}}]}
    assert validate(spec, "r" * MAX_ROUTER_NAME) == []
    assert MAX_ROUTER_NAME == 50


def test_every_mistake_at_once_is_reported_once_each() -> None:
    """Issues do not hide each other: a spec with several mistakes gets one issue per mistake."""
    spec = {
        "backends": [{"name": "a"}, {"name": "a", "inferenceServiceRef": {"name": "a"}, "tier": "cloud"}],
        "defaultRoute": "zz",
        "rules": [{"name": "pii", "match": {"dataClassification": ["pii"]}, "route": {"backends": ["q"]}}],
        "policy": {"auditLog": {"sink": "otlp"}},
    }
    fields = [issue.field for issue in errors(validate(spec, "r"))]
    assert fields == [
        "spec.backends[0]",
        "spec.backends[1].name",
        "spec.backends[1].tier",
        "spec.defaultRoute",
        "spec.rules[0].route.backends[0]",
        "spec.rules[0].failClosed",
        "spec.policy.auditLog.sink",
    ]


def test_external_backends_marked_local_may_serve_sensitive_rules() -> None:
    """An on-premises server outside Kubernetes, declared local by the router's owner."""
    spec = {
        "backends": [
            {
                "name": "onprem",
                "tier": "local",
                "external": {"provider": "openai", "model": "m", "url": "http://10.1.2.3:8000"},
            }
        ],
        "rules": [
            {
                "name": "pii",
                "match": {"dataClassification": ["pii"]},
                "failClosed": True,
                "route": {"backends": ["onprem"]},
            }
        ],
    }
    assert validate(spec, "r") == []
