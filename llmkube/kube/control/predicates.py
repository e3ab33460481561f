"""Filters that decide whether a change is worth a reconcile (controller-runtime's predicates).

A predicate sees the :class:`~llmkube.kube.cache.store.Change`; ADDED and DELETED always pass the
"changed" predicates, which only judge MODIFIED changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmkube.kube.cache import Change
from llmkube.kube.types import Obj

__all__ = [
    "Predicate",
    "all_of",
    "annotations_changed",
    "any_of",
    "deleted",
    "generation_changed",
    "has_labels",
    "labels_changed",
    "negate",
    "resource_version_changed",
]

Predicate = Callable[[Change], bool]


def _meta(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _modified_and_differs(change: Change, field: str) -> bool:
    if change.type != "MODIFIED":
        return True
    return _meta(change.old_obj).get(field) != _meta(change.new).get(field)


def generation_changed(change: Change) -> bool:
    """Drop updates that did not bump ``metadata.generation``: status and metadata-only writes,
    including our own status updates.  (Kinds without a generation, like ConfigMaps, never pass an
    update: do not use it for them.)"""
    return _modified_and_differs(change, "generation")


def resource_version_changed(change: Change) -> bool:
    """Drop resync-style updates whose object did not change at all."""
    return _modified_and_differs(change, "resourceVersion")


def labels_changed(change: Change) -> bool:
    return _modified_and_differs(change, "labels")


def annotations_changed(change: Change) -> bool:
    return _modified_and_differs(change, "annotations")


def has_labels(selector: Mapping[str, str]) -> Predicate:
    """Pass changes whose object carries all these labels (old or new, so a label removal that
    takes an object out of scope is still seen)."""

    def matches(obj: Obj | None) -> bool:
        labels = _meta(obj).get("labels") or {}
        return all(labels.get(key) == value for key, value in selector.items())

    def predicate(change: Change) -> bool:
        return matches(change.new) or matches(change.old_obj)

    return predicate


def deleted(change: Change) -> bool:
    """Only deletions (e.g. of an object a controller recreates, whose other changes do not matter)."""
    return change.type == "DELETED"


def all_of(*predicates: Predicate) -> Predicate:
    return lambda change: all(predicate(change) for predicate in predicates)


def any_of(*predicates: Predicate) -> Predicate:
    return lambda change: any(predicate(change) for predicate in predicates)


def negate(predicate: Predicate) -> Predicate:
    return lambda change: not predicate(change)
