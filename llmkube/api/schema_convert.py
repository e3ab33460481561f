"""Between the API contract's JSON-Schema form and a CRD's structural OpenAPI v3 schema.

The contract (llmkube/api/contract/inferenceservice.schema.json) is the CRD schema as
`openapi2jsonschema --strict` renders it for client-side validators (kubeconform, the CRDs catalog):

- a property that is not `required` gets `type: [T, "null"]`;
- every object with `properties`, except the root, gets `additionalProperties: false`;
- an int-or-string field (`x-kubernetes-int-or-string` with `anyOf: [integer, string]`) becomes
  `oneOf: [{type: string, pattern?}, {type: integer}]`, plus `{type: null}` when optional.

The API server only accepts the structural form (one `type` string; `additionalProperties` never
beside `properties`), so the CRD carries `to_structural(contract)`, and the equality test proves
`to_json_schema(crd schema) == contract` exactly: the same schema in the two notations, with
nothing added or lost. Both functions are pure and total on their input shape.
"""

from typing import Any

Schema = dict[str, Any]


def to_structural(node: Schema) -> Schema:
    """Contract (JSON-Schema) form -> CRD structural form."""
    int_or_string = bool(node.get("x-kubernetes-int-or-string"))
    out: Schema = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            concrete = [t for t in value if t != "null"]
            out["type"] = concrete[0]
        elif key == "additionalProperties" and value is False and "properties" in node:
            continue  # implied in a structural schema; forbidden beside `properties`
        elif key == "properties":
            out[key] = {name: to_structural(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = to_structural(value)
        elif key == "oneOf" and int_or_string:
            variants = [v for v in value if v.get("type") != "null"]
            string_variant = next(v for v in variants if v.get("type") == "string")
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            if "pattern" in string_variant:
                out["pattern"] = string_variant["pattern"]
        else:
            out[key] = value
    return out


def to_json_schema(node: Schema, *, required: bool = True, root: bool = True) -> Schema:
    """CRD structural form -> contract (JSON-Schema) form; `required` says whether the parent
    lists this property as required (array items and the root always count as required)."""
    int_or_string = bool(node.get("x-kubernetes-int-or-string"))
    out: Schema = {}
    for key, value in node.items():
        if key == "properties":
            names = set(node.get("required", ()))
            out[key] = {
                name: to_json_schema(sub, required=name in names, root=False) for name, sub in value.items()
            }
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = to_json_schema(value, root=False)
        elif key == "anyOf" and int_or_string:
            string_variant: Schema = {"type": "string"}
            if "pattern" in node:
                string_variant["pattern"] = node["pattern"]
            out["oneOf"] = [string_variant, {"type": "integer"}] + ([] if required else [{"type": "null"}])
        elif key == "pattern" and int_or_string:
            continue  # moved into the string variant
        elif key == "type":
            out[key] = value if required else [value, "null"]
        else:
            out[key] = value
    if not root and "properties" in node and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out
