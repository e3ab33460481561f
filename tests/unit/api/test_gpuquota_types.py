"""The GPUQuota types follow the CRD's schema, and the reference's own examples round-trip unchanged."""

from pathlib import Path
from typing import Any

import pytest
import yaml
from test_types import _nested_model, _schema_vs_model

from llmkube.api.crds import gpuquota_crd
from llmkube.api.gpuquota import GPUQuota, GPUQuotaSpec, GPUQuotaStatus

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "tests" / "unit" / "api" / "reference_gpuquota_samples.yaml"
SAMPLES = ROOT / "manifests" / "samples" / "gpuquota"


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = gpuquota_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_types_follow_the_crd_schema() -> None:
    props = _schema()["properties"]
    problems = _schema_vs_model(props["spec"], GPUQuotaSpec, "spec")
    problems += _schema_vs_model(props["status"], GPUQuotaStatus, "status")
    assert problems == []
    conditions = _nested_model(GPUQuotaStatus.model_fields["conditions"].annotation)
    assert conditions is not None and conditions.__name__ == "Condition"


def _quotas(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "GPUQuota"]


@pytest.mark.parametrize("path", [REFERENCE, *sorted(SAMPLES.glob("*.yaml"))], ids=lambda p: p.stem)
def test_samples_round_trip(path: Path) -> None:
    quotas = _quotas(path)
    assert quotas
    for doc in quotas:
        assert GPUQuota.model_validate(doc).to_json() == doc


def test_crd_is_namespaced_with_the_reference_names_and_columns() -> None:
    crd = gpuquota_crd()
    assert crd["metadata"]["name"] == "gpuquotas.inference.llmkube.dev"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["shortNames"] == ["gq"]
    columns = [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns[:2] == ["GPU Count", "Used GPUs"]  # the reference's, first
    assert "Waiting" in columns
