#!/usr/bin/env python3
"""Write docs/api-reference.md from the CRDs in manifests/crd/ (what the API server validates
against): every field of every kind, with its type, default, allowed values and description.
tests/unit/install/test_api_reference.py fails when the page and the CRDs disagree; `make crds`
runs this after writing the CRDs.
"""

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CRDS = ROOT / "manifests" / "crd"
PAGE = ROOT / "docs" / "api-reference.md"

HEADER = """# API reference

Generated from the CustomResourceDefinitions in `manifests/crd/` by `hack/gen-api-reference.py`
(`make crds`): every field the API server accepts, with its type, default and allowed values.
[behaviour.md](behaviour.md) says what the controller does with them.
"""


TABLE_HEAD = "| field | type | default, values | description |\n|---|---|---|---|\n"


def _type(schema: dict[str, Any]) -> str:
    kind = str(schema.get("type") or ("any" if schema.get("x-kubernetes-preserve-unknown-fields") else ""))
    if schema.get("x-kubernetes-int-or-string"):
        kind = "int or string"
    if kind == "array":
        kind = f"[]{_type(schema.get('items') or {})}"
    elif kind == "object" and "additionalProperties" in schema and not schema.get("properties"):
        kind = f"map[string]{_type(schema['additionalProperties'] or {})}"
    return kind or "any"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _constraints(schema: dict[str, Any]) -> str:
    parts = []
    if "default" in schema:
        parts.append(f"default `{json.dumps(schema['default'])}`")
    if schema.get("enum"):
        parts.append("one of " + ", ".join(f"`{value}`" for value in schema["enum"]))
    for key, label in (
        ("minimum", "≥"),
        ("maximum", "≤"),
        ("minLength", "length ≥"),
        ("maxLength", "length ≤"),
    ):
        if key in schema:
            parts.append(f"{label} {schema[key]}")
    if "pattern" in schema:
        parts.append("a pattern (in the CRD)")  # regular expressions read badly in a table
    return "; ".join(parts)


def _rows(schema: dict[str, Any], path: str, required: set[str]) -> list[str]:
    rows = []
    for name, child in (schema.get("properties") or {}).items():
        field = f"{path}.{name}" if path else name
        mark = " (required)" if name in required else ""
        description = _cell(str(child.get("description") or ""))
        rows.append(f"| `{field}`{mark} | {_type(child)} | {_cell(_constraints(child))} | {description} |")
        nested = child
        if child.get("type") == "array":
            nested = child.get("items") or {}
            field += "[]"
        if nested.get("properties"):
            rows.extend(_rows(nested, field, set(nested.get("required") or ())))
    return rows


def render() -> str:
    sections = [HEADER]
    for path in sorted(CRDS.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            names, group = crd["spec"]["names"], crd["spec"]["group"]
            for version in crd["spec"]["versions"]:
                schema = version["schema"]["openAPIV3Schema"]
                short = ", ".join(f"`{name}`" for name in names.get("shortNames") or [])
                sections.append(
                    f"\n## {names['kind']} ({group}/{version['name']})\n\n"
                    f"{_cell(str(schema.get('description') or ''))}\n\n"
                    f"Plural `{names['plural']}`, scope {crd['spec']['scope']}"
                    + (f", short names {short}" if short else "")
                    + ".\n"
                )
                for part in ("spec", "status"):
                    sub = (schema.get("properties") or {}).get(part)
                    if not sub:
                        continue
                    sections.append(
                        f"\n### {part}\n\n{TABLE_HEAD}"
                        + "\n".join(_rows(sub, part, set(sub.get("required") or ())))
                        + "\n"
                    )
    return "".join(sections)


def main() -> int:
    PAGE.write_text(render())
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
