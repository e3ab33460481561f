"""Trim objects before they are cached (client-go's ``TransformFunc``).

``managedFields`` is often half of an object's memory, but our own manager's Apply entries are
what the owned-fields compare needs, so only those are kept whole.
"""

from __future__ import annotations

from collections.abc import Callable

from llmkube.kube.types import Obj

__all__ = ["IDENTITY_FIELDS", "LAST_APPLIED_ANNOTATION", "Transform", "keep_only", "strip_for_cache"]

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


#: What the cache itself needs of every object: its key, and what tells one version from the next
#: (a relist compares uid and resourceVersion).
IDENTITY_FIELDS = ("name", "namespace", "uid", "resourceVersion", "generation", "deletionTimestamp")


def keep_only(*paths: tuple[str, ...]) -> Transform:
    """Cache only the fields a controller reads (e.g. ``("status", "capacity")`` of a Node), plus
    apiVersion, kind and the identity metadata. A kind read for one small field is otherwise cached
    whole: a GPU Node is tens of KiB of images, conditions and labels."""

    def transform(obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        kept: Obj = {key: obj[key] for key in ("apiVersion", "kind") if key in obj}
        kept["metadata"] = {key: meta[key] for key in IDENTITY_FIELDS if key in meta}
        for path in paths:
            value: object = obj
            for part in path:
                value = value.get(part) if isinstance(value, dict) else None
            if value is None:
                continue
            target = kept
            for part in path[:-1]:
                target = target.setdefault(part, {})
            target[path[-1]] = value
        return kept

    return transform
