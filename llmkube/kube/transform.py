"""Trim objects before they are cached (client-go's ``TransformFunc``).

``managedFields`` is often half of an object's memory (controller-semantics.md §5), but our own
manager's Apply entries are what the owned-fields compare needs, so only those are kept.
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
    compare reads), and drop kubectl's last-applied copy."""

    def transform(obj: Obj) -> Obj:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return obj
        entries = meta.get("managedFields")
        if entries:
            ours = [
                entry
                for entry in entries
                if entry.get("manager") == field_manager and entry.get("operation") == "Apply"
            ]
            if ours:
                meta["managedFields"] = ours
            else:
                del meta["managedFields"]
        annotations = meta.get("annotations")
        if annotations and LAST_APPLIED_ANNOTATION in annotations:
            del annotations[LAST_APPLIED_ANNOTATION]
        return obj

    return transform
