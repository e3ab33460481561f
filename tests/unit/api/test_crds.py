"""The InferenceService CRD is the API contract; the committed manifests are what the code generates."""

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmkube.api import crds
from llmkube.api.manifests import to_yaml
from llmkube.api.schema_convert import to_json_schema, to_structural

ROOT = Path(__file__).resolve().parents[3]
# The contract the code and tests use: the reference operator's InferenceService schema (v0.8.1 to
# v0.8.7), which llmkube never changes, so that its users' manifests keep applying unchanged.
VENDORED_CONTRACT = ROOT / "llmkube" / "api" / "contract" / "inferenceservice.schema.json"
CONTRACT_SHA256 = "a6e1d784c8dd54e3184cca5e8e8f321f15a9a17370b77e666f023db9e85daca0"
CRD_DIR = ROOT / "manifests" / "crd"


def committed(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((CRD_DIR / name).read_text())
    return doc


def test_the_contract_is_unchanged_byte_for_byte() -> None:
    assert hashlib.sha256(VENDORED_CONTRACT.read_bytes()).hexdigest() == CONTRACT_SHA256


def test_the_code_reads_the_vendored_contract() -> None:
    assert crds.contract_schema() == json.loads(VENDORED_CONTRACT.read_text())


def test_the_contract_converts_both_ways() -> None:
    """The contract's structural form (the CRD's base, test_contract_superset.py) converts back to
    the contract exactly: nothing is added or lost by the notation."""
    contract = json.loads(VENDORED_CONTRACT.read_text())
    assert to_json_schema(to_structural(contract)) == contract


def test_committed_manifests_are_generated_not_hand_edited() -> None:
    assert (CRD_DIR / "inference.llmkube.dev_inferenceservices.yaml").read_text() == to_yaml(
        [crds.inferenceservice_crd()]
    )
    assert (CRD_DIR / "inference.llmkube.dev_models.yaml").read_text() == to_yaml([crds.model_crd()])
    assert (CRD_DIR / "inference.llmkube.dev_modelrouters.yaml").read_text() == to_yaml(
        [crds.modelrouter_crd()]
    )
    assert (CRD_DIR / "inference.llmkube.dev_gpuquotas.yaml").read_text() == to_yaml([crds.gpuquota_crd()])


def _walk_types(node: Any, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if isinstance(node.get("type"), list):
            found.append(path)
        if "properties" in node and "additionalProperties" in node:
            found.append(path + " (additionalProperties beside properties)")
        for key, value in node.items():
            found += _walk_types(value, f"{path}.{key}")
    elif isinstance(node, list):
        for item in node:
            found += _walk_types(item, path)
    return found


@pytest.mark.parametrize(
    "crd",
    [crds.inferenceservice_crd(), crds.model_crd(), crds.modelrouter_crd(), crds.gpuquota_crd()],
    ids=["isvc", "model", "modelrouter", "gpuquota"],
)
def test_schemas_are_structural(crd: dict[str, Any]) -> None:
    assert _walk_types(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]) == []


def test_isvc_crd_names_subresources_and_columns() -> None:
    crd = crds.inferenceservice_crd()
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "inferenceservices.inference.llmkube.dev"
    # isvc for the reference operator's users, lkisvc where KServe also claims isvc.
    assert spec["names"]["shortNames"] == ["isvc", "lkisvc"]
    assert spec["names"]["categories"] == ["llmkube"]
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
    }
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert [c["name"] for c in version["additionalPrinterColumns"] if "priority" not in c] == [
        "Phase",
        "Model",
        "Replicas",
        "Endpoint",
        "Age",
    ]
    assert {name for name, c in columns.items() if c.get("priority") == 1} == {"Reason", "Queue", "Priority"}
    assert columns["Replicas"]["jsonPath"] == ".status.readyReplicas"
    assert columns["Queue"]["jsonPath"] == ".status.queuePosition"


def test_model_crd_names_and_columns() -> None:
    crd = crds.model_crd()
    version = crd["spec"]["versions"][0]
    assert crd["spec"]["names"]["shortNames"] == ["mdl"]
    assert version["subresources"] == {"status": {}}
    assert [(c["name"], c.get("priority", 0)) for c in version["additionalPrinterColumns"]] == [
        ("Phase", 0),
        ("Size", 0),
        ("Accelerator", 0),
        ("Arch", 1),
        ("Age", 0),
    ]


def test_modelrouter_crd_names_and_columns() -> None:
    crd = crds.modelrouter_crd()
    version = crd["spec"]["versions"][0]
    assert crd["metadata"]["name"] == "modelrouters.inference.llmkube.dev"
    assert crd["spec"]["names"]["shortNames"] == ["mr"]
    assert crd["spec"]["names"]["categories"] == ["llmkube"]
    assert version["subresources"] == {"status": {}}
    assert [
        (c["name"], c["jsonPath"], c.get("priority", 0)) for c in version["additionalPrinterColumns"]
    ] == [
        ("Phase", ".status.phase", 0),
        ("Endpoint", ".status.endpoint", 0),
        ("Rules", ".status.activeRules", 0),
        ("Default", ".spec.defaultRoute", 1),
        ("Age", ".metadata.creationTimestamp", 0),
    ]


def test_shipped_priority_classes_are_what_the_controller_ensures() -> None:
    """GitOps applies manifests/priorityclasses, the controller applies priority_classes(): any
    difference would be a tug of war between the two field managers."""
    from llmkube.plan.inferenceservice.priority import priority_classes

    shipped = list(
        yaml.safe_load_all((ROOT / "manifests" / "priorityclasses" / "priority_classes.yaml").read_text())
    )
    assert shipped == priority_classes()
