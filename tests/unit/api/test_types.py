"""The pydantic types follow the CRD (the contract and the v0.9 additions) field for field, and the
samples round-trip through them."""

from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from llmkube.api.crds import inferenceservice_schema, model_schema
from llmkube.api.inferenceservice import InferenceService, InferenceServiceSpec, InferenceServiceStatus
from llmkube.api.model import Model
from llmkube.api.schema_convert import to_json_schema

SAMPLES = Path(__file__).resolve().parents[3] / "manifests" / "samples"
# Kubernetes sub-objects kept as plain dicts (validated by the API server, not re-modelled here).
PASSTHROUGH = {
    "spec.env",
    "spec.tolerations",
    "spec.imagePullSecrets",
    "spec.podSecurityContext",
    "spec.securityContext",
    "spec.probeOverrides.startup",
    "spec.probeOverrides.liveness",
    "spec.probeOverrides.readiness",
    "spec.nodeSelector",
    "spec.podLabels",
    "spec.podAnnotations",
    "spec.affinity",
    "spec.topologySpreadConstraints",
    "spec.extraVolumes",
    "spec.extraVolumeMounts",
    "spec.hardware.gpu.resourceClaims",
    "status.acceleration",  # the reference's, never written here
    "status.gateway",
    "status.conditions",  # the shared Condition type, checked separately below
}


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
        for inner in get_args(candidate):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


def _schema_vs_model(schema: dict[str, Any], model: type[BaseModel], path: str) -> list[str]:
    """Every property in the schema is a field with that alias, and vice versa; enums, bounds and
    defaults agree."""
    problems: list[str] = []
    by_alias = {(f.alias or name): f for name, f in model.model_fields.items()}
    props: dict[str, Any] = schema.get("properties", {})
    for missing in sorted(set(by_alias) - set(props)):
        problems.append(f"{path}.{missing}: in the model, not in the schema")
    for prop, sub in props.items():
        here = f"{path}.{prop}"
        if prop not in by_alias:
            problems.append(f"{here}: in the schema, not in the model")
            continue
        field = by_alias[prop]
        if "default" in sub and field.default != sub["default"]:
            problems.append(f"{here}: default {field.default!r} != {sub['default']!r}")
        json_field = model.model_json_schema(by_alias=True)["properties"][prop]
        variants = json_field.get("anyOf", [json_field])
        if "enum" in sub:
            enums = [v.get("enum") or [v.get("const")] for v in variants if "enum" in v or "const" in v]
            if not enums or sorted(enums[0]) != sorted(sub["enum"]):
                problems.append(f"{here}: enum {enums} != {sub['enum']}")
        for bound, key in (("minimum", "minimum"), ("maximum", "maximum")):
            if bound in sub:
                seen = [v.get(key) for v in variants if key in v]
                if seen != [sub[bound]]:
                    problems.append(f"{here}: {bound} {seen} != {sub[bound]}")
        if "pattern" in sub:
            seen = [v.get("pattern") for v in variants if "pattern" in v]
            if seen != [sub["pattern"]]:
                problems.append(f"{here}: pattern {seen} != {sub['pattern']}")
        if here.removeprefix(".") in PASSTHROUGH:
            continue
        nested = _nested_model(field.annotation)
        item_schema = sub.get("items", sub)
        if nested is not None and "properties" in item_schema:
            problems += _schema_vs_model(item_schema, nested, here)
    return problems


def test_isvc_spec_and_status_follow_the_contract_field_for_field() -> None:
    props = to_json_schema(inferenceservice_schema())["properties"]
    problems = _schema_vs_model(props["spec"], InferenceServiceSpec, "spec")
    problems += _schema_vs_model(props["status"], InferenceServiceStatus, "status")
    problems += _schema_vs_model(
        props["status"]["properties"]["conditions"]["items"],
        _nested_model(InferenceServiceStatus.model_fields["conditions"].annotation) or BaseModel,
        "status.conditions[]",
    )
    assert problems == []


def test_model_types_follow_the_model_crd_schema() -> None:
    schema = model_schema()["properties"]
    problems = _schema_vs_model(schema["spec"], Model.model_fields["spec"].annotation, "spec")  # type: ignore[arg-type]
    status_type = _nested_model(Model.model_fields["status"].annotation)
    assert status_type is not None
    problems += _schema_vs_model(schema["status"], status_type, "status")
    assert problems == []


def _sample_docs() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs.append((f"{path.stem}/{doc['kind']}", doc))
    return docs


@pytest.mark.parametrize(("name", "doc"), _sample_docs(), ids=[n for n, _ in _sample_docs()])
def test_samples_round_trip(name: str, doc: dict[str, Any]) -> None:
    kind = {"InferenceService": InferenceService, "Model": Model}[doc["kind"]]
    parsed = kind.model_validate(doc)
    assert parsed.to_json() == doc


def test_samples_cover_every_runtime() -> None:
    runtimes = {
        d["spec"].get("runtime", "llamacpp") for _, d in _sample_docs() if d["kind"] == "InferenceService"
    }
    assert runtimes >= {"llamacpp", "vllm", "tgi", "generic"}


def test_defaults_are_the_contracts() -> None:
    isvc = InferenceService.model_validate(
        {"metadata": {"name": "x"}, "spec": {"modelRef": "m", "endpoint": {}}}
    )
    assert (isvc.spec.runtime, isvc.spec.replicas, isvc.spec.priority) == ("llamacpp", 1, "normal")
    assert isvc.spec.endpoint is not None
    assert (isvc.spec.endpoint.port, isvc.spec.endpoint.path, isvc.spec.endpoint.type) == (
        8080,
        "/v1/chat/completions",
        "ClusterIP",
    )
    # Defaults do not leak into the serialised form: what was not set is not sent.
    assert isvc.to_json() == {"metadata": {"name": "x"}, "spec": {"modelRef": "m", "endpoint": {}}}


INVALID_ISVC: list[tuple[dict[str, Any], str]] = [
    ({"replicas": 11}, "spec.replicas"),
    ({"replicas": -1}, "spec.replicas"),
    ({"runtime": "ollama"}, "spec.runtime"),
    ({"priority": "urgent"}, "spec.priority"),
    ({"contextSize": 64}, "spec.contextSize"),
    ({"parallelSlots": 65}, "spec.parallelSlots"),
    ({"cacheTypeK": "q3"}, "spec.cacheTypeK"),
    ({"endpoint": {"port": 70000}}, "spec.endpoint.port"),
    ({"endpoint": {"type": "ExternalName"}}, "spec.endpoint.type"),
    ({"resources": {"gpu": 9}}, "spec.resources.gpu"),
    ({"autoscaling": {"minReplicas": 1}}, "spec.autoscaling.maxReplicas"),
    (
        {"autoscaling": {"maxReplicas": 2, "metrics": [{"type": "External", "name": "x"}]}},
        "spec.autoscaling.metrics.0.type",
    ),
    ({"ropeScaling": {"type": "yarn", "factor": "four"}}, "spec.ropeScaling.factor"),
    ({"vllmConfig": {"gpuMemoryUtilization": 1.5}}, "spec.vllmConfig.gpuMemoryUtilization"),
    (
        {"vllmConfig": {"speculative": {"numSpeculativeTokens": 17}}},
        "spec.vllmConfig.speculative.numSpeculativeTokens",
    ),
    ({"tgiConfig": {"quantize": "int4"}}, "spec.tgiConfig.quantize"),
    (
        {"personaPlexConfig": {"hfTokenSecretRef": {"name": "s"}}},
        "spec.personaPlexConfig.hfTokenSecretRef.key",
    ),
    ({"unknownField": True}, "spec.unknownField"),
]


@pytest.mark.parametrize(("spec_patch", "field"), INVALID_ISVC, ids=[f for _, f in INVALID_ISVC])
def test_invalid_isvc_is_rejected_naming_the_field(spec_patch: dict[str, Any], field: str) -> None:
    doc = {"metadata": {"name": "x"}, "spec": {"modelRef": "m", **spec_patch}}
    with pytest.raises(ValidationError) as err:
        InferenceService.model_validate(doc)
    locations = {".".join(str(p) for p in e["loc"]) for e in err.value.errors()}
    assert any(loc == field or loc.startswith(field + ".") for loc in locations), locations


def test_missing_model_ref_is_rejected() -> None:
    with pytest.raises(ValidationError) as err:
        InferenceService.model_validate({"spec": {}})
    assert {".".join(map(str, e["loc"])) for e in err.value.errors()} == {"spec.modelRef"}


INVALID_MODEL: list[tuple[dict[str, Any], str]] = [
    ({"source": "ftp://bucket/x"}, "spec.source"),
    ({"source": "hf://org/repo", "files": ["x"] * 257}, "spec.files"),
    ({"source": "has space/x"}, "spec.source"),
    ({"source": "/x", "sha256": "abc"}, "spec.sha256"),
    ({"source": "/x", "refreshPolicy": "Always"}, "spec.refreshPolicy"),
    ({"source": "/x", "hardware": {"accelerator": "tpu"}}, "spec.hardware.accelerator"),
    ({"source": "/x", "hardware": {"gpu": {"count": 9}}}, "spec.hardware.gpu.count"),
    ({"source": "/x", "hardware": {"gpu": {"layers": -2}}}, "spec.hardware.gpu.layers"),
    (
        {"source": "/x", "hardware": {"gpu": {"sharding": {"strategy": "diagonal"}}}},
        "spec.hardware.gpu.sharding.strategy",
    ),
]


@pytest.mark.parametrize(("spec", "field"), INVALID_MODEL, ids=[f for _, f in INVALID_MODEL])
def test_invalid_model_is_rejected_naming_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        Model.model_validate({"spec": spec})
    locations = {".".join(str(p) for p in e["loc"]) for e in err.value.errors()}
    assert field in locations, locations
