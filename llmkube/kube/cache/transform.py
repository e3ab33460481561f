"""Trim objects before they are cached (client-go's ``TransformFunc``).

``managedFields`` is often half of an object's memory, but our own manager's Apply entries are
what the owned-fields compare needs, so only those are kept whole; their ``fieldsV1`` trie is
kept as its JSON text (a few KiB of text instead of hundreds of small dicts; ``owned_fields``
parses it when asked). ``keep_owned`` goes further for the kinds we write: only the fields our
entries own, and what the controller reads besides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from llmkube.kube.managed_fields import prune_to_owned
from llmkube.kube.types import Obj

__all__ = [
    "IDENTITY_FIELDS",
    "LAST_APPLIED_ANNOTATION",
    "Transform",
    "keep_only",
    "keep_owned",
    "strip_for_cache",
]

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
                _compact(entry) if _ours(entry, field_manager) else _stub(entry)
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


def _compact(entry: Obj) -> Obj:
    fields = entry.get("fieldsV1")
    if isinstance(fields, dict):
        entry["fieldsV1"] = orjson.dumps(fields).decode()
    return entry


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


#: What the cache keeps of every object's metadata besides the identity: read by label indexes,
#: owner lookups (enqueue_owner, "controlled by this service") and age.
KEPT_METADATA = (*IDENTITY_FIELDS, "labels", "ownerReferences", "creationTimestamp")


def keep_owned(field_manager: str = "llmkube-controller", *paths: tuple[str, ...]) -> Transform:
    """For the kinds we apply: cache the fields ``field_manager``'s Apply entries own (all the
    owned-fields compare and the hand-over read), the identity, labels and owner references, our
    managedFields as ``strip_for_cache`` keeps them, and the whole values at ``paths`` (fields read
    although others own them: a Deployment's status counters, a Service's ports). A Deployment's
    server defaults, status conditions and other managers' fields are not cached."""
    strip = strip_for_cache(field_manager)

    def transform(obj: Obj) -> Obj:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return obj
        owned: Obj = {}
        for entry in meta.get("managedFields") or ():
            fields = entry.get("fieldsV1")
            if _ours(entry, field_manager) and isinstance(fields, dict):
                owned = _merged(owned, prune_to_owned(obj, fields))
        kept: Obj = {key: obj[key] for key in ("apiVersion", "kind") if key in obj}
        kept.update(
            (key, value) for key, value in owned.items() if key not in ("metadata", "apiVersion", "kind")
        )
        strip(obj)
        kept_meta = {key: meta[key] for key in (*KEPT_METADATA, "managedFields") if key in meta}
        for key, value in (owned.get("metadata") or {}).items():
            kept_meta.setdefault(key, value)
        kept["metadata"] = kept_meta
        for path in paths:
            value = _value_at(obj, path)
            if value is not None:
                _set_at(kept, path, value)
        return kept

    return transform


def _merged(left: Any, right: Any) -> Any:
    if isinstance(left, dict) and isinstance(right, dict):
        merged = dict(left)
        for key, value in right.items():
            merged[key] = _merged(merged[key], value) if key in merged else value
        return merged
    return right


def _value_at(obj: Obj, path: tuple[str, ...]) -> Any:
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _set_at(target: Obj, path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = target[part] = {}
        target = child
    target[path[-1]] = value
