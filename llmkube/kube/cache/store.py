"""The informer cache: objects keyed by ``namespace/name`` plus named secondary indexes.

Only the informer that owns a store mutates it (from its own task, so no locking is needed on a
single event loop); everyone else reads.  Objects are the orjson-parsed dicts, shared, not copied:
readers must treat them as immutable (copy before changing anything).

A *compact* store keeps each object as its JSON bytes and parses it on every read (each read is
then a fresh copy): about a quarter of the memory of the dicts, for ~10-20 us per read. Meant for
kinds that are read rarely (a Deployment is read by its owner's reconcile), not for ones read on
every event or scrape.

A LIST reaches the store through :meth:`Store.listed` (each object in its kept form as soon as it
leaves its page) and :meth:`Store.replace_listed` (whose changes are parsed one at a time as they
are handed out): a large relist never holds all its objects as dicts at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import orjson

from llmkube.kube.types import Obj

__all__ = [
    "BY_CONTROLLER_UID",
    "BY_NAMESPACE",
    "Change",
    "IndexFunc",
    "Listed",
    "PendingChange",
    "Store",
    "Tombstone",
    "by_controller_uid",
    "by_field",
    "by_label",
    "by_namespace",
    "object_key",
    "resource_version",
]

IndexFunc = Callable[[Obj], Iterable[str]]

BY_NAMESPACE = "namespace"
BY_CONTROLLER_UID = "controller-uid"


def object_key(obj: Obj) -> str:
    """client-go's ``MetaNamespaceKeyFunc``: ``namespace/name``, or ``name`` when cluster-scoped."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name") or ""
    return f"{namespace}/{name}" if namespace else name


@dataclass(frozen=True, slots=True)
class Tombstone:
    """An object that vanished while we were not watching (found missing on a relist).

    ``obj`` is the last state we knew, which may be stale: client-go's ``DeletedFinalStateUnknown``.
    """

    key: str
    obj: Obj


EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True, slots=True)
class Change:
    """One change to the cache, as handed to event handlers.

    ``old`` is None for ADDED; ``new`` is None for DELETED, where ``old`` may be a
    :class:`Tombstone`.  ``initial`` marks objects from the informer's first LIST, so
    controllers can enqueue them with low priority.
    """

    type: EventType
    old: Obj | Tombstone | None
    new: Obj | None
    initial: bool = False

    @property
    def obj(self) -> Obj:
        """The object the change is about: the new state, else the last known state."""
        if self.new is not None:
            return self.new
        if isinstance(self.old, Tombstone):
            return self.old.obj
        assert self.old is not None, "a Change always carries an object"
        return self.old

    @property
    def old_obj(self) -> Obj | None:
        return self.old.obj if isinstance(self.old, Tombstone) else self.old


@dataclass(frozen=True, slots=True)
class Listed:
    """One object of a LIST, already in the form the store keeps (JSON bytes in a compact store),
    with what :meth:`Store.replace_listed` needs to know about it: a listing never holds every
    object of a large LIST as parsed dicts at once (a restart at 10,000 services would, for each
    kind at the same time)."""

    key: str
    stored: Obj | bytes
    uid: str | None
    resource_version: str | None
    #: each index function's values, computed while the object was still a dict
    index_values: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class PendingChange:
    """A change of :meth:`Store.replace_listed`, its objects still in their stored form: parsed
    by :meth:`change` one at a time as they are handed out, not all at once."""

    type: EventType
    key: str
    old: Obj | bytes | None
    new: Obj | bytes | None
    initial: bool

    def change(self) -> Change:
        new = None if self.new is None else _decoded(self.new)
        if self.old is None:
            return Change(self.type, None, new, self.initial)
        old = _decoded(self.old)
        # A replace's old object is one whose deletion was never observed: a tombstone.
        return Change(
            self.type, Tombstone(self.key, old) if self.type == "DELETED" else old, new, self.initial
        )


def by_namespace(obj: Obj) -> Iterable[str]:
    namespace = (obj.get("metadata") or {}).get("namespace")
    return (namespace,) if namespace else ()


def by_controller_uid(obj: Obj) -> Iterable[str]:
    """The UID of the owner reference marked ``controller: true`` (at most one per object)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("uid"):
            return (ref["uid"],)
    return ()


def by_label(label: str, *, namespaced: bool = True) -> IndexFunc:
    """Index on one label's value; namespaced objects are indexed as ``namespace/value``."""

    def index(obj: Obj) -> Iterable[str]:
        meta = obj.get("metadata") or {}
        value = (meta.get("labels") or {}).get(label)
        if value is None:
            return ()
        namespace = meta.get("namespace")
        return (f"{namespace}/{value}",) if namespaced and namespace else (value,)

    return index


def by_field(*path: str, namespaced: bool = True) -> IndexFunc:
    """Index on a string field, e.g. ``by_field("spec", "modelRef")`` maps an object to
    ``namespace/<spec.modelRef>``; a field holding a dict with ``name`` uses that name."""

    def index(obj: Obj) -> Iterable[str]:
        value: object = obj
        for part in path:
            if not isinstance(value, dict):
                return ()
            value = value.get(part)
        if isinstance(value, dict):
            value = value.get("name")
        if not isinstance(value, str) or not value:
            return ()
        namespace = (obj.get("metadata") or {}).get("namespace")
        return (f"{namespace}/{value}",) if namespaced and namespace else (value,)

    return index


def _encoded(obj: Obj) -> bytes:
    # orjson's output keeps its over-allocated buffer (up to several times the JSON's length): copy
    # it into an exactly sized bytes object before keeping it.
    return bytes(memoryview(orjson.dumps(obj)))


def _decoded(stored: Obj | bytes) -> Obj:
    if isinstance(stored, bytes):
        obj: Obj = orjson.loads(stored)
        return obj
    return stored


class Store:
    def __init__(self, indexers: dict[str, IndexFunc] | None = None, *, compact: bool = False) -> None:
        self.compact = compact
        self._items: dict[str, Obj | bytes] = {}
        self._indexers: dict[str, IndexFunc] = {BY_NAMESPACE: by_namespace}
        self._indices: dict[str, dict[str, set[str]]] = {BY_NAMESPACE: {}}
        for name, func in (indexers or {}).items():
            self.add_index(name, func)

    # -- reading --------------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        stored = self._items.get(key)
        return None if stored is None else _decoded(stored)

    def get_object(self, namespace: str | None, name: str) -> Obj | None:
        return self.get(f"{namespace}/{name}" if namespace else name)

    def objects(self) -> list[Obj]:
        return [_decoded(stored) for stored in self._items.values()]

    def keys(self) -> list[str]:
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[Obj]:
        return iter(self.objects())

    def tokens(self) -> list[tuple[str, object]]:
        """Each key with an opaque token that stays the same object for as long as the cached
        object is unchanged (what the store keeps of it): a reader can keep what it derived from an
        object and know when to derive it again without parsing it (`decode` reads it)."""
        return list(self._items.items())

    def token(self, key: str) -> object | None:
        return self._items.get(key)

    @staticmethod
    def decode(token: object) -> Obj:
        """The object a token of this store stands for."""
        assert isinstance(token, bytes | dict), "not a token of a Store"
        return _decoded(token)

    def by_index(self, index: str, value: str) -> list[Obj]:
        """Objects whose index function produced ``value`` (sorted by key, for determinism)."""
        if index not in self._indices:
            raise KeyError(f"no index named {index!r}; known: {sorted(self._indices)}")
        keys = self._indices[index].get(value)
        return [_decoded(self._items[key]) for key in sorted(keys)] if keys else []

    def keys_by_index(self, index: str, value: str) -> list[str]:
        """The keys :meth:`by_index` would return the objects of (sorted): nothing is parsed."""
        if index not in self._indices:
            raise KeyError(f"no index named {index!r}; known: {sorted(self._indices)}")
        return sorted(self._indices[index].get(value) or ())

    def index_values(self, index: str) -> list[str]:
        return sorted(self._indices[index])

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Register an index (an existing store is indexed immediately)."""
        if name in self._indexers and self._indexers[name] is not func:
            raise ValueError(f"an index named {name!r} already exists")
        self._indexers[name] = func
        self._indices[name] = {}
        for key, stored in self._items.items():
            self._index_one(name, key, _decoded(stored))

    # -- writing (informer only) ----------------------------------------------------------------

    def listed(self, obj: Obj) -> Listed:
        """``obj`` (already transformed) as this store will keep it; the dict may be dropped."""
        return Listed(
            object_key(obj),
            _encoded(obj) if self.compact else obj,
            _uid(obj),
            resource_version(obj),
            tuple((name, tuple(func(obj))) for name, func in self._indexers.items()),
        )

    def upsert(self, obj: Obj) -> Obj | None:
        """Insert or replace; returns the previous object."""
        return self._put(self.listed(obj))

    def delete(self, key: str) -> Obj | None:
        return self._pop(key)

    def replace(self, objects: Iterable[Obj], *, initial: bool = False) -> list[Change]:
        """:meth:`replace_listed` for parsed objects, its changes parsed."""
        pending = self.replace_listed([self.listed(obj) for obj in objects], initial=initial)
        return [change.change() for change in pending]

    def replace_listed(self, listed: Iterable[Listed], *, initial: bool = False) -> list[PendingChange]:
        """Make the store equal to a fresh LIST and describe the difference.

        New keys are ADDED, keys whose resourceVersion moved are MODIFIED, and keys missing from the
        list are DELETED with a :class:`Tombstone` (their deletion was never observed).  Objects
        with an unchanged resourceVersion produce no change: nothing happened to them.  Only objects
        that were already cached are parsed (to compare them); the changes carry stored forms."""
        fresh = {item.key: item for item in listed}
        changes: list[PendingChange] = []
        for key in [key for key in self._items if key not in fresh]:
            changes.append(PendingChange("DELETED", key, self._items[key], None, initial))
            self._pop(key)
        for key, item in fresh.items():
            stored = self._items.get(key)
            if stored is None:
                self._put(item)
                changes.append(PendingChange("ADDED", key, None, item.stored, initial))
                continue
            previous = _decoded(stored)
            if _uid(previous) != item.uid:  # deleted and recreated under the same name
                self._put(item, previous)
                changes.append(PendingChange("DELETED", key, stored, None, initial))
                changes.append(PendingChange("ADDED", key, None, item.stored, initial))
            elif resource_version(previous) != item.resource_version:
                self._put(item, previous)
                changes.append(PendingChange("MODIFIED", key, stored, item.stored, initial))
        return changes

    # -- internals ------------------------------------------------------------------------------

    def _put(self, item: Listed, previous: Obj | None = None) -> Obj | None:
        """Store one listed object (indexed); returns the previous object (``previous``: already
        parsed by the caller, so it is not parsed again to unindex it)."""
        previous = self._pop(item.key, previous)
        self._items[item.key] = item.stored
        computed = dict(item.index_values)
        obj: Obj | None = None
        for name in self._indexers:
            values = computed.get(name)
            if values is None:  # an index added after the object was listed
                obj = obj if obj is not None else _decoded(item.stored)
                values = tuple(self._indexers[name](obj))
            index = self._indices[name]
            for value in values:
                index.setdefault(value, set()).add(item.key)
        return previous

    def _pop(self, key: str, parsed: Obj | None = None) -> Obj | None:
        """Remove and unindex one object; returns it (``parsed``: its parsed form, if known)."""
        stored = self._items.pop(key, None)
        if stored is None:
            return None
        old = parsed if parsed is not None else _decoded(stored)
        self._unindex(key, old)
        return old

    def _index_one(self, name: str, key: str, obj: Obj) -> None:
        index = self._indices[name]
        for value in self._indexers[name](obj):
            index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: Obj) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


def resource_version(obj: Obj) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv is not None else None


def _uid(obj: Obj) -> str | None:
    uid = (obj.get("metadata") or {}).get("uid")
    return str(uid) if uid is not None else None
