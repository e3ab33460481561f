"""Type aliases shared by the kube machinery (one place, like starlette's ``types.py``)."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["JSON", "Obj", "ObjectKey"]

#: A Kubernetes object as parsed by orjson: plain dicts, lists, str, int, float, bool, None.
Obj = dict[str, Any]
JSON = Any


class ObjectKey(NamedTuple):
    """What a reconcile is asked to converge: namespace ('' for cluster-scoped) and name."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of(cls, obj: Obj) -> ObjectKey:
        meta = obj.get("metadata") or {}
        return cls(meta.get("namespace") or "", meta.get("name") or "")

    @classmethod
    def parse(cls, text: str) -> ObjectKey:
        namespace, sep, name = text.partition("/")
        return cls(namespace, name) if sep else cls("", namespace)
