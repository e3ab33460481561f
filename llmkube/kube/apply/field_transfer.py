"""Decide, from ``metadata.managedFields``, what must happen to field ownership before an apply.

Pure functions over plain objects (see managed_fields.py for the fieldsV1 format):

* ``takeover_may_be_needed`` - whether an object (a cache copy: caches keep only our own entries)
  shows anything to take over; only then is the whole object read and the list below computed.
* ``takeover_entries`` - the managedFields list after our Apply entry has taken over the
  ``Update`` entries of the managers we adopt from and every stray field of the exclusive
  subtrees (present on the object, absent from the intent). None when nothing is to take over.
  The caller writes the list (a JSON patch guarded by the resourceVersion); the next apply then
  removes the fields we own but do not set, as server-side apply always does.
* ``fields_to_hand_over`` - the fields of the hand-over list that the intent no longer sets while
  our Apply entry still owns them, with their current values.

Only maps are walked into: a list inside an exclusive subtree is taken over whole, as an atomic
value. Entries of another API version or of a subresource are never touched.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from llmkube.kube.apply.field_policy import FieldPath, FieldPolicy
from llmkube.kube.types import Obj

__all__ = [
    "fields_to_hand_over",
    "owns",
    "takeover_entries",
    "takeover_may_be_needed",
    "value_at",
]

_MISSING = object()
Trie = dict[str, Any]


def value_at(obj: Any, path: FieldPath) -> Any:
    """The value at ``path``, or ``_MISSING`` (test with ``is_set``)."""
    node = obj
    for name in path:
        if not isinstance(node, dict) or name not in node:
            return _MISSING
        node = node[name]
    return node


def is_set(value: Any) -> bool:
    return value is not _MISSING


def owns(trie: Trie | None, path: FieldPath) -> bool:
    """True when the fieldsV1 ``trie`` holds ``path`` (as a leaf or as a node with children)."""
    node: Any = trie
    for name in path:
        if not isinstance(node, dict) or f"f:{name}" not in node:
            return False
        node = node[f"f:{name}"]
    return True


def _trie_for_value(value: Any) -> Trie:
    """The fieldsV1 of a whole value, as an apply of it records it: each field of a map down to
    the leaves (an applier owns a struct's fields, not the struct: removing the last of them
    removes the struct)."""
    if isinstance(value, dict) and value:
        return {f"f:{name}": _trie_for_value(item) for name, item in value.items()}
    return {}


def _trie_at(path: FieldPath, leaf: Trie) -> Trie:
    trie = leaf
    for name in reversed(path):
        trie = {f"f:{name}": trie}
    return trie


def union(left: Trie, right: Trie) -> Trie:
    """Both field sets (a leaf ``{}`` merged with a node is the node)."""
    merged = copy.deepcopy(left)
    for key, child in right.items():
        if key in merged and isinstance(merged[key], dict) and isinstance(child, dict):
            merged[key] = union(merged[key], child)
        else:
            merged[key] = copy.deepcopy(child)
    return merged


def _without(trie: Trie, path: FieldPath) -> Trie:
    """``trie`` minus ``path`` and everything below it; nodes left empty go too (an empty node would
    mean "owns this whole value")."""
    if not path:
        return {}
    key = f"f:{path[0]}"
    if key not in trie:
        return trie
    result = dict(trie)
    child = result.pop(key)
    if len(path) > 1 and isinstance(child, dict) and child:
        rest = _without(child, path[1:])
        if rest:
            result[key] = rest
    return result


def _contains(outer: Trie, inner: Trie) -> bool:
    """Every field of ``inner`` is in ``outer``."""
    for key, child in inner.items():
        if key not in outer:
            return False
        if isinstance(child, dict) and child and not _contains(outer[key], child):
            return False
    return True


def _stray_paths(found: Any, wanted: Any, path: FieldPath) -> Iterable[FieldPath]:
    """Paths below ``path`` that the object has and the intent does not set."""
    if not isinstance(found, dict):
        return
    for name, value in found.items():
        here = (*path, name)
        if not isinstance(wanted, dict) or name not in wanted:
            yield here
        elif isinstance(value, dict):
            yield from _stray_paths(value, wanted[name], here)


def _main_entry(entry: Obj, api_version: str) -> bool:
    return not entry.get("subresource") and entry.get("apiVersion", api_version) == api_version


def _adoptable(entry: Obj, policy: FieldPolicy, api_version: str) -> bool:
    return (
        entry.get("manager") in policy.adopt_from
        and entry.get("operation") == "Update"
        and _main_entry(entry, api_version)
    )


def takeover_may_be_needed(observed: Obj, desired: Obj, policy: FieldPolicy) -> bool:
    """Cheap, and safe on a trimmed copy: an entry of a manager we adopt from, or a field in an
    exclusive subtree that the intent does not set (ours or not: the whole object will tell)."""
    api_version = str(desired.get("apiVersion") or observed.get("apiVersion") or "")
    entries = (observed.get("metadata") or {}).get("managedFields") or ()
    if any(_adoptable(entry, policy, api_version) for entry in entries):
        return True
    return any(
        next(iter(_stray_paths(value_at(observed, root), value_at(desired, root), root)), None) is not None
        for root in policy.exclusive
    )


def takeover_entries(
    observed: Obj, desired: Obj, manager: str, policy: FieldPolicy, now: str
) -> list[Obj] | None:
    """The managedFields to write so that our Apply entry owns what ``policy`` says we take over
    (``now`` stamps a new entry); None when it already does and nothing else owns a stray field.
    ``observed`` must carry every entry (read from the server, never a trimmed cache copy): the
    list returned replaces them all."""
    api_version = str(desired.get("apiVersion") or observed.get("apiVersion") or "")
    entries = [copy.deepcopy(e) for e in (observed.get("metadata") or {}).get("managedFields") or ()]
    ours_index = next(
        (
            index
            for index, entry in enumerate(entries)
            if entry.get("manager") == manager
            and entry.get("operation") == "Apply"
            and _main_entry(entry, api_version)
        ),
        None,
    )
    ours: Trie = dict(entries[ours_index].get("fieldsV1") or {}) if ours_index is not None else {}
    taken: Trie = {}
    changed = False
    keep: list[Obj] = []
    for index, entry in enumerate(entries):
        if index == ours_index:
            continue
        if _adoptable(entry, policy, api_version):
            fields = dict(entry.get("fieldsV1") or {})
            fields.pop("f:status", None)  # status is never ours to apply through the object
            taken = union(taken, fields)
            changed = True
            continue
        keep.append(entry)
    for root in policy.exclusive:
        for stray in _stray_paths(value_at(observed, root), value_at(desired, root), root):
            taken = union(taken, _trie_at(stray, _trie_for_value(value_at(observed, stray))))
            for entry in keep:
                if _main_entry(entry, api_version) and owns(entry.get("fieldsV1"), stray):
                    entry["fieldsV1"] = _without(entry["fieldsV1"], stray)
                    changed = True
    if not changed and _contains(ours, taken):
        return None
    merged = union(ours, taken)
    if ours_index is not None:
        mine = entries[ours_index]
        mine["fieldsV1"] = merged
    else:
        mine = {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": merged,
        }
    return [mine, *(entry for entry in keep if entry.get("fieldsV1") or entry.get("subresource"))]


def fields_to_hand_over(
    observed: Obj, desired: Obj, owned: Trie | None, policy: FieldPolicy
) -> list[tuple[FieldPath, Any]]:
    """The hand-over fields the intent dropped while ``owned`` (our Apply entry) still holds them."""
    found = []
    for path in policy.hand_over:
        if is_set(value_at(desired, path)) or not owns(owned, path):
            continue
        value = value_at(observed, path)
        if is_set(value):
            found.append((path, value))
    return found
