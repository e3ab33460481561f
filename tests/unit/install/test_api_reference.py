"""docs/api-reference.md is what hack/gen-api-reference.py makes of the CRDs in manifests/crd/, and
it lists every field of their schemas."""

from pathlib import Path
from typing import Any

import yaml
from test_generated_files import load_script

ROOT = Path(__file__).resolve().parents[3]


def fields(schema: dict[str, Any], path: str) -> list[str]:
    found = []
    for name, child in (schema.get("properties") or {}).items():
        field = f"{path}.{name}"
        found.append(field)
        nested = child.get("items") or {} if child.get("type") == "array" else child
        found += fields(nested, field + ("[]" if child.get("type") == "array" else ""))
    return found


def test_the_page_is_current() -> None:
    page = (ROOT / "docs" / "api-reference.md").read_text()
    assert page == load_script("gen-api-reference").render(), (
        "docs/api-reference.md is stale: run `make crds` (or python hack/gen-api-reference.py)"
    )


def test_every_field_of_every_crd_is_listed() -> None:
    page = (ROOT / "docs" / "api-reference.md").read_text()
    for path in sorted((ROOT / "manifests" / "crd").glob("inference.llmkube.dev_*.yaml")):
        crd = yaml.safe_load(path.read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert f"## {crd['spec']['names']['kind']} (" in page
        listed = [f for part in ("spec", "status") for f in fields(schema["properties"][part], part)]
        assert listed
        for field in listed:
            assert f"| `{field}`" in page, field
