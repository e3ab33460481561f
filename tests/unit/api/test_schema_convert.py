"""The two notations of one schema: each rule of the conversion, both ways."""

from typing import Any

import pytest

from llmkube.api.schema_convert import to_json_schema, to_structural

CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "optional scalar becomes nullable, required stays plain",
        {
            "type": "object",
            "required": ["a"],
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        },
        {
            "type": "object",
            "required": ["a"],
            "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"]}},
        },
    ),
    (
        "nested objects get additionalProperties false, maps keep their value schema",
        {
            "type": "object",
            "properties": {
                "o": {"type": "object", "properties": {"x": {"type": "boolean"}}},
                "m": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        {
            "type": "object",
            "properties": {
                "o": {
                    "type": ["object", "null"],
                    "additionalProperties": False,
                    "properties": {"x": {"type": ["boolean", "null"]}},
                },
                "m": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            },
        },
    ),
    (
        "array items are never nullable",
        {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}}}},
        {"type": "object", "properties": {"l": {"type": ["array", "null"], "items": {"type": "string"}}}},
    ),
    (
        "int-or-string: anyOf becomes oneOf, the pattern moves into the string variant",
        {
            "type": "object",
            "required": ["port"],
            "properties": {
                "port": {
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": True,
                },
                "divisor": {
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "pattern": "^[0-9]+$",
                    "x-kubernetes-int-or-string": True,
                },
            },
        },
        {
            "type": "object",
            "required": ["port"],
            "properties": {
                "port": {
                    "oneOf": [{"type": "string"}, {"type": "integer"}],
                    "x-kubernetes-int-or-string": True,
                },
                "divisor": {
                    "oneOf": [
                        {"type": "string", "pattern": "^[0-9]+$"},
                        {"type": "integer"},
                        {"type": "null"},
                    ],
                    "x-kubernetes-int-or-string": True,
                },
            },
        },
    ),
]


@pytest.mark.parametrize(("name", "structural", "json_schema"), CASES, ids=[c[0] for c in CASES])
def test_conversion_both_ways(name: str, structural: dict[str, Any], json_schema: dict[str, Any]) -> None:
    assert to_json_schema(structural) == json_schema
    assert to_structural(json_schema) == structural
