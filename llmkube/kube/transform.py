"""Trim objects before they are cached (client-go's ``TransformFunc``).

``managedFields`` is often half of an object's memory, but our own manager's Apply entries are
what the owned-fields compare needs, so only those are kept whole.
"""

from __future__ import annotations

from collections.abc import Callable

from llmkube.kube.types import Obj

__all__ = ["LAST_APPLIED_ANNOTATION", "Transform", "strip_for_cache"]

Transform = Callable[[Obj], Obj]

#: kubectl's client-side-apply copy of the whole object: large, and never needed by a controller.
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"


def strip_for_cache(field_manager: str = "llmkube-controller") -> Transform:
    """Keep only ``field_manager``'s *Apply* entries of ``managedFields`` (what the owned-fields
    compare reads) whole; of the other managers' ``Update`` entries on the object itself, only who
    wrote and with which API version (a stub without the field set: what tells the applier that a
    predecessor's fields may be there to adopt). Drop kubectl's last-applied copy."""

    def transform(obj: Obj) -> Obj:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return obj
        entries = meta.get("managedFields")
        if entries:
            kept = [
                entry if _ours(entry, field_manager) else _stub(entry)
                for entry in entries
                if _ours(entry, field_manager)
                or (entry.get("operation") == "Update" and not entry.get("subresource"))
            ]
            if kept:
                meta["managedFields"] = kept
            else:
                del meta["managedFields"]
        annotations = meta.get("annotations")
        if annotations and LAST_APPLIED_ANNOTATION in annotations:
            del annotations[LAST_APPLIED_ANNOTATION]
        return obj

    return transform


def _ours(entry: Obj, field_manager: str) -> bool:
    return entry.get("manager") == field_manager and entry.get("operation") == "Apply"


def _stub(entry: Obj) -> Obj:
    return {key: entry[key] for key in ("manager", "operation", "apiVersion") if key in entry}
