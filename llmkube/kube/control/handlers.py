"""Map cache changes to the keys a controller reconciles, and describe what a controller watches.

A mapper turns one :class:`~llmkube.kube.cache.store.Change` into zero or more
:class:`~llmkube.kube.types.ObjectKey` s: the object itself (:func:`enqueue_object`), its controller
owner (:func:`enqueue_owner`), or anything a function derives from it (:func:`enqueue_mapped`).
On an update, owner and mapped lookups use both the old and the new object, so a change of
ownership or of a label wakes both the previous and the new owner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from llmkube.kube.cache import Change
from llmkube.kube.control.predicates import Predicate
from llmkube.kube.resource import Resource
from llmkube.kube.types import Obj, ObjectKey

__all__ = ["Mapper", "Watch", "enqueue_by_label", "enqueue_mapped", "enqueue_object", "enqueue_owner"]

Mapper = Callable[[Change], Iterable[ObjectKey]]


def enqueue_object(change: Change) -> Iterable[ObjectKey]:
    return (ObjectKey.of(change.obj),)


def _both(change: Change) -> list[Obj]:
    objects = [obj for obj in (change.old_obj, change.new) if obj is not None]
    return objects


def enqueue_owner(owner: Resource, *, only_controller: bool = True) -> Mapper:
    """Enqueue the owner named in ``ownerReferences`` whose group and kind match ``owner`` (the
    version is ignored, as controller-runtime does).  A namespaced owner lives in the child's
    namespace (cross-namespace owner references are not allowed)."""

    def mapper(change: Change) -> Iterable[ObjectKey]:
        keys: dict[ObjectKey, None] = {}
        for obj in _both(change):
            meta = obj.get("metadata") or {}
            for ref in meta.get("ownerReferences") or ():
                if only_controller and not ref.get("controller"):
                    continue
                group = str(ref.get("apiVersion") or "").rpartition("/")[0]
                if (group, ref.get("kind")) != owner.group_kind or not ref.get("name"):
                    continue
                namespace = (meta.get("namespace") or "") if owner.namespaced else ""
                keys[ObjectKey(namespace, ref["name"])] = None
        return list(keys)

    return mapper


def enqueue_mapped(function: Callable[[Obj], Iterable[ObjectKey]]) -> Mapper:
    """Enqueue whatever ``function`` derives from the object (old and new, on updates)."""

    def mapper(change: Change) -> Iterable[ObjectKey]:
        keys: dict[ObjectKey, None] = {}
        for obj in _both(change):
            for key in function(obj):
                keys[key] = None
        return list(keys)

    return mapper


def enqueue_by_label(label: str, *, namespaced: bool = True) -> Mapper:
    """Enqueue the object named by a label's value (for children that cannot carry an owner
    reference, e.g. a cluster-scoped object labelled with its namespaced owner's name)."""

    def keys_of(obj: Obj) -> Iterable[ObjectKey]:
        meta = obj.get("metadata") or {}
        value = (meta.get("labels") or {}).get(label)
        if not value:
            return ()
        if namespaced and "/" in value:
            namespace, _, name = value.partition("/")
            return (ObjectKey(namespace, name),)
        return (ObjectKey((meta.get("namespace") or "") if namespaced else "", value),)

    return enqueue_mapped(keys_of)


@dataclass(frozen=True)
class Watch:
    """What a controller watches and how changes become its keys.

    ``namespace=None`` means the manager's namespace scope (all namespaces unless it has one).
    Informers are shared between controllers that watch the same resource with the same scope and
    selectors."""

    resource: Resource
    mapper: Mapper = enqueue_object
    predicates: Sequence[Predicate] = field(default=())
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
