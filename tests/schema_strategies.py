"""Hypothesis strategies that draw documents valid under a JSON schema (the subset the contract
uses: type lists with null, properties/required, maps, arrays, enums, patterns, bounds, oneOf and
int-or-string). Unset fields are drawn as absent keys, as the API server stores them."""

from typing import Any

from hypothesis import strategies as st

_INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12)
_KEYS = st.from_regex(r"[a-z][a-z0-9.-]{0,10}/?[a-z0-9]{0,6}", fullmatch=True)


def from_schema(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "oneOf" in node:
        return st.one_of([from_schema(option) for option in node["oneOf"] if option.get("type") != "null"])
    if node.get("x-kubernetes-int-or-string"):
        return st.one_of(st.integers(min_value=0, max_value=65535), _TEXT)
    types = node.get("type")
    kinds = [t for t in (types if isinstance(types, list) else [types]) if t not in (None, "null")]
    if not kinds:
        return st.just({})
    return _typed(kinds[0], node)


def _typed(kind: str, node: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "enum" in node:
        return st.sampled_from([v for v in node["enum"] if v is not None])
    if kind == "object":
        return _object(node)
    if kind == "array":
        return st.lists(from_schema(node.get("items", {})), max_size=3)
    if kind == "string":
        if "pattern" in node:
            return st.from_regex(node["pattern"], fullmatch=True)
        return st.text(
            alphabet=st.characters(min_codepoint=32, max_codepoint=126),
            min_size=node.get("minLength", 0),
            max_size=min(node.get("maxLength", 12), 12),
        )
    if kind == "integer":
        low, high = _INT_BOUNDS.get(node.get("format", "int64"), _INT_BOUNDS["int64"])
        return st.integers(min_value=node.get("minimum", low), max_value=node.get("maximum", high))
    if kind == "number":
        return st.floats(
            min_value=node.get("minimum"),
            max_value=node.get("maximum"),
            allow_nan=False,
            allow_infinity=False,
        )
    if kind == "boolean":
        return st.booleans()
    raise AssertionError(f"schema type {kind!r} is not handled")


def _object(node: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties: dict[str, Any] = node.get("properties") or {}
    if properties:
        required = set(node.get("required", []))
        return st.fixed_dictionaries(
            {name: from_schema(schema) for name, schema in properties.items() if name in required},
            optional={
                name: from_schema(schema) for name, schema in properties.items() if name not in required
            },
        )
    values = node.get("additionalProperties")
    if isinstance(values, dict):
        return st.dictionaries(_KEYS, from_schema(values), max_size=3)
    return st.just({})
