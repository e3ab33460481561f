"""The InferenceService CRD is a strict superset of the v0.8.7 contract: every path of the contract
is in the CRD with the same keywords (type, default, bounds, pattern, description, required, list
and map types), the only change being the enum members v0.9 added to two paths; every other path
of the CRD is one of the v0.9 additions."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmkube.api import crds
from llmkube.api.isvc_additions import (
    ENUM_ADDITIONS,
    endpoint_additions,
    resources_additions,
    spec_additions,
    status_additions,
)
from llmkube.api.schema_convert import to_json_schema

ROOT = Path(__file__).resolve().parents[3]
CONTRACT = json.loads((ROOT / "llmkube" / "api" / "contract" / "inferenceservice.schema.json").read_text())
COMMITTED = yaml.safe_load(
    (ROOT / "manifests" / "crd" / "inference.llmkube.dev_inferenceservices.yaml").read_text()
)
CHILDREN = ("properties", "items", "additionalProperties")


def paths(node: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], dict[str, Any]]:
    """Every schema node by path (property names, `[]` for items, `{}` for map values), with its
    own keywords (the children are paths of their own)."""
    if not isinstance(node, dict):
        return {}
    found = {path: {k: v for k, v in node.items() if k not in CHILDREN or not isinstance(v, dict)}}
    for name, child in (node.get("properties") or {}).items():
        found |= paths(child, (*path, name))
    if isinstance(node.get("items"), dict):
        found |= paths(node["items"], (*path, "[]"))
    if isinstance(node.get("additionalProperties"), dict):
        found |= paths(node["additionalProperties"], (*path, "{}"))
    return found


def served_json_schema() -> dict[str, Any]:
    """The committed CRD's schema, in the contract's (JSON-Schema) notation."""
    return to_json_schema(COMMITTED["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


CONTRACT_PATHS = paths(CONTRACT)
SERVED_PATHS = paths(served_json_schema())


def test_the_committed_crd_is_the_generated_one() -> None:
    assert COMMITTED["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == crds.inferenceservice_schema()


@pytest.mark.parametrize("path", sorted(CONTRACT_PATHS), ids=lambda p: ".".join(p) or "(root)")
def test_every_contract_path_is_served_unchanged(path: tuple[str, ...]) -> None:
    assert path in SERVED_PATHS, f"{'.'.join(path)} is missing from the CRD"
    contract, served = CONTRACT_PATHS[path], SERVED_PATHS[path]
    if path in ENUM_ADDITIONS:
        # The one change allowed: v0.9's new members after the contract's own, in its order.
        assert served["enum"] == [*contract["enum"], *ENUM_ADDITIONS[path]]
        served = {**served, "enum": contract["enum"]}
    assert served == contract


def test_the_comparison_reaches_every_typed_node_of_the_contract() -> None:
    """Counted another way (every object with a `type` or a `oneOf` in the document; the variants of an
    int-or-string `oneOf` are keywords of their field, compared with it): the walk missed none."""

    def typed(node: Any) -> int:
        if isinstance(node, list):
            return sum(typed(item) for item in node)
        if not isinstance(node, dict):
            return 0
        own = 1 if ("type" in node and not isinstance(node["type"], dict)) or "oneOf" in node else 0
        return own + sum(typed(value) for key, value in node.items() if key != "oneOf")

    assert len(CONTRACT_PATHS) == typed(CONTRACT)


def test_every_other_served_path_is_a_v09_addition() -> None:
    roots = {
        *(("spec", name) for name in spec_additions()),
        *(("spec", "endpoint", name) for name in endpoint_additions()),
        *(("spec", "resources", name) for name in resources_additions()),
        *(("status", name) for name in status_additions()),
    }
    extra = set(SERVED_PATHS) - set(CONTRACT_PATHS)
    outside = sorted(".".join(p) for p in extra if not any(p[: len(root)] == root for root in roots))
    assert outside == []
    assert {p for p in extra if len(p) <= 3} >= roots


def test_the_additions_are_the_v0919_field_names() -> None:
    """The names of the reference's v0.9.19 InferenceService fields that v0.8.7 lacks."""
    assert set(spec_additions()) == {
        "mode", "suspend", "revisionHistoryLimit", "topologySpreadConstraints", "affinity",
        "speculativeDecoding", "turboQuantBits", "pagedSSDCacheDir", "hotCacheMaxSize",
        "pagedSSDCacheMaxSize", "extraVolumes", "extraVolumeMounts", "bindAddress", "modelCache",
        "sglangConfig", "disruption", "rolloutPolicy", "slo", "maxPodLifetimeSeconds",
        "maxPodLifetimeIdleTimeoutSeconds",
    }  # fmt: skip
    assert set(endpoint_additions()) == {"nodePort", "gateway"}
    assert set(resources_additions()) == {"ephemeralStorage", "gpuSharing"}
    assert set(status_additions()) == {"mode", "acceleration", "gateway"}
