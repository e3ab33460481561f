"""InferenceService objects as the cache holds them (plain dicts), for the controller's pure parts."""

from typing import Any


def isvc(name: str, namespace: str = "ai", **fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-02T03:04:05Z"},
        "spec": {"modelRef": "m", **fields.get("spec", {})},
        "status": fields.get("status", {}),
    }
