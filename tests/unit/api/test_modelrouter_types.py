"""The ModelRouter types follow the CRD schema field for field, accept the reference operator's
manifests unchanged, and refuse what the schema refuses, naming the field."""

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from test_types import _nested_model, _schema_vs_model

from llmkube.api.crds import modelrouter_crd
from llmkube.api.modelrouter import DURATION_PATTERN, ModelRouter, ModelRouterSpec, ModelRouterStatus

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "manifests" / "samples" / "router"
REFERENCE_SAMPLE = ROOT / "tests" / "unit" / "api" / "reference_modelrouter_sample.yaml"
PASSTHROUGH = {"spec.proxy.resources"}


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = modelrouter_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_types_follow_the_crd_schema() -> None:
    props = _schema()["properties"]
    problems = _schema_vs_model(props["spec"], ModelRouterSpec, "spec")
    problems += _schema_vs_model(props["status"], ModelRouterStatus, "status")
    assert problems == []
    conditions = _nested_model(ModelRouterStatus.model_fields["conditions"].annotation)
    assert conditions is not None and conditions.__name__ == "Condition"


def _routers(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "ModelRouter"]


@pytest.mark.parametrize("path", [*sorted(SAMPLES.glob("*.yaml")), REFERENCE_SAMPLE], ids=lambda p: p.stem)
def test_samples_round_trip(path: Path) -> None:
    routers = _routers(path)
    assert routers
    for doc in routers:
        assert ModelRouter.model_validate(doc).to_json() == doc


@pytest.mark.parametrize(
    "value", ["15s", "1m30s", "250ms", "2h", "0", "1.5s", "100us", "100µs", "3ns"], ids=str
)
def test_durations_go_accepts_match_the_pattern(value: str) -> None:
    import re

    assert re.fullmatch(DURATION_PATTERN, value)


@pytest.mark.parametrize("value", ["15", "-1s", "1 s", "s", "1d", "1.5.5s", ""], ids=repr)
def test_malformed_durations_are_refused(value: str) -> None:
    import re

    assert not re.fullmatch(DURATION_PATTERN, value)


def _router(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"backends": [{"name": "a", "inferenceServiceRef": {"name": "a"}}]}
    return {"metadata": {"name": "r"}, "spec": {**base, **spec}}


INVALID: list[tuple[dict[str, Any], str]] = [
    ({"backends": []}, "spec.backends"),
    ({"backends": [{"name": "A_b"}]}, "spec.backends.0.name"),
    ({"backends": [{"name": "a", "tier": "edge"}]}, "spec.backends.0.tier"),
    ({"backends": [{"name": "a", "weight": -1}]}, "spec.backends.0.weight"),
    ({"backends": [{"name": "a", "timeout": "30"}]}, "spec.backends.0.timeout"),
    (
        {"backends": [{"name": "a", "external": {"provider": "azure", "model": "m"}}]},
        "spec.backends.0.external",
    ),
    ({"backends": [{"name": "a", "external": {"provider": "openai"}}]}, "spec.backends.0.external.model"),
    (
        {"backends": [{"name": "a", "costPerMillionTokens": {"promptUSD": "$1"}}]},
        "spec.backends.0.costPerMillionTokens.promptUSD",
    ),
    ({"rules": [{"name": "r", "route": {"backends": []}}]}, "spec.rules.0.route.backends"),
    ({"rules": [{"name": "r", "route": {"backends": ["a"], "strategy": "random"}}]}, "spec.rules.0.route"),
    ({"rules": [{"name": "r"}]}, "spec.rules.0.route"),
    (
        {"rules": [{"name": "r", "match": {"taskComplexity": "hard"}, "route": {"backends": ["a"]}}]},
        "spec.rules.0.match.taskComplexity",
    ),
    ({"policy": {"budgets": [{"name": "b", "scope": "org"}]}}, "spec.policy.budgets.0.scope"),
    ({"policy": {"budgets": [{"name": "b", "scope": "router", "maxTokens": 0}]}}, "spec.policy.budgets.0"),
    ({"policy": {"classification": {"mode": "ml"}}}, "spec.policy.classification.mode"),
    ({"policy": {"auditLog": {"sink": "syslog"}}}, "spec.policy.auditLog.sink"),
    ({"proxy": {"replicas": 11}}, "spec.proxy.replicas"),
    ({"proxy": {"quarantineDuration": "fifteen"}}, "spec.proxy.quarantineDuration"),
    ({"proxy": {"maxRequestBodyBytes": 10}}, "spec.proxy.maxRequestBodyBytes"),
    ({"endpoint": {"type": "ExternalName"}}, "spec.endpoint.type"),
    ({"unknown": 1}, "spec.unknown"),
]


@pytest.mark.parametrize(("patch", "field"), INVALID, ids=[f for _, f in INVALID])
def test_invalid_spec_is_refused_naming_the_field(patch: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        ModelRouter.model_validate(_router(**patch))
    locations = {".".join(str(p) for p in e["loc"]) for e in err.value.errors()}
    assert any(loc == field or loc.startswith(field + ".") for loc in locations), locations


def test_defaults_are_the_schemas_and_do_not_leak() -> None:
    router = ModelRouter.model_validate(
        _router(
            rules=[{"name": "r", "route": {"backends": ["a"]}}], endpoint={}, policy={"classification": {}}
        )
    )
    assert router.spec.rules is not None and router.spec.rules[0].route.strategy == "primary-fallback"
    assert router.spec.endpoint is not None and router.spec.endpoint.port == 8080
    assert router.spec.backends[0].tier is None  # no schema default: the effective tier is decided later
    assert "strategy" not in router.to_json()["spec"]["rules"][0]["route"]
