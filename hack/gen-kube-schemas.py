#!/usr/bin/env python3
"""Write llmkube/api/kube/corev1.schema.json: the structural schemas of the Kubernetes core/v1 types
the InferenceService and Model embed since v0.9 (Affinity, TopologySpreadConstraint, Volume,
VolumeMount, PodResourceClaim), taken from Kubernetes' own published OpenAPI v3 document
(`api/openapi-spec/v3/api__v1_openapi.json` of the kubernetes/kubernetes tree we build,
found in the Go module cache, or the path given).

$refs are inlined, `allOf` wrappers unwrapped, Quantity and IntOrString become
`x-kubernetes-int-or-string`, and only what a CRD schema may carry is kept, so the API server
validates these fields at `kubectl apply` as it does a pod's. Descriptions are kept for the top
two levels (what `kubectl explain` shows first) and dropped below, which keeps the CRD small.
Run it when the pinned Kubernetes changes; `make crds` reads the file it writes.
"""

import glob
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "llmkube" / "api" / "kube" / "corev1.schema.json"
TYPES = ("Affinity", "TopologySpreadConstraint", "Volume", "VolumeMount", "PodResourceClaim")
KEEP = {
    "type",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "format",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
}
INT_OR_STRING = (
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
)
DESCRIBED_DEPTH = 2


def _spec_path(argv: list[str]) -> Path:
    if len(argv) > 1:
        return Path(argv[1])
    found = sorted(
        glob.glob(
            str(Path.home() / "go/pkg/mod/k8s.io/kubernetes@*/api/openapi-spec/v3/api__v1_openapi.json")
        )
    )
    if not found:
        sys.exit("no api__v1_openapi.json: pass its path (kubernetes/kubernetes api/openapi-spec/v3/)")
    return Path(found[-1])


def convert(node: dict[str, Any], schemas: dict[str, Any], depth: int) -> dict[str, Any]:
    description = node.get("description")
    if "allOf" in node and len(node["allOf"]) == 1:
        node = {**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in INT_OR_STRING:
            out: dict[str, Any] = {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            }
            if description and depth <= DESCRIBED_DEPTH:
                out["description"] = description
            return out
        target = schemas[name]
        merged = {**target, **({"description": description} if description else {})}
        return convert(merged, schemas, depth)
    out = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {p: convert(sub, schemas, depth + 1) for p, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = convert(value, schemas, depth + 1)
        elif key in KEEP:
            out[key] = value
    if "properties" in out and "type" not in out:
        out["type"] = "object"
    if description and depth <= DESCRIBED_DEPTH:
        out["description"] = description
    return out


def main() -> None:
    document = json.loads(_spec_path(sys.argv).read_text())
    schemas = document["components"]["schemas"]
    result = {name: convert(schemas[f"io.k8s.api.core.v1.{name}"], schemas, 1) for name in TYPES}
    OUT.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
