"""Read ``metadata.managedFields`` (fieldsV1) and prune an object to the fields one manager owns.

fieldsV1 is a trie of path elements (structured-merge-diff's ``PathElement`` serialisation):

* ``f:<name>`` - a field of a map or struct;
* ``k:{"name":"app"}`` - the element of a keyed list (``listType: map``) with these key values;
* ``v:<json>`` - an element of a set (``listType: set``), identified by its value;
* ``i:<n>`` - a list element by index (rare: only lists without keys);
* ``.`` - the node itself (present when the node is owned as well as, or instead of, children).

An empty child (``{}``) means "this whole value": a scalar, an atomic list (``args``), or an atomic
struct (a Deployment's ``selector``).  Pruning keeps the observed value at every owned path and
drops everything else, so it can be compared with what we would apply now.
"""

from __future__ import annotations

from typing import Any

import orjson

from llmkube.kube.types import Obj

__all__ = ["owned_fields", "prune_to_owned"]


def owned_fields(obj: Obj, manager: str, subresource: str = "") -> dict[str, Any] | None:
    """The fieldsV1 trie of ``manager``'s Apply entry for ``subresource`` ('' = the main resource),
    or None when that manager never applied this object (then it cannot be trusted: apply)."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or ():
        if (
            entry.get("manager") == manager
            and entry.get("operation") == "Apply"
            and (entry.get("subresource") or "") == subresource
            and entry.get("fieldsType", "FieldsV1") == "FieldsV1"
        ):
            fields = entry.get("fieldsV1")
            if isinstance(fields, str):  # a cached copy keeps the trie as its JSON text (transform.py)
                fields = _parse_json(fields)
            return fields if isinstance(fields, dict) else {}
    return None


def _parse_json(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return _UNMATCHABLE


_UNMATCHABLE = object()


def _element_matches(kind: str, selector: Any, index: int, item: Any) -> bool:
    if kind == "k":
        return (
            isinstance(item, dict)
            and isinstance(selector, dict)
            and all(item.get(name) == value for name, value in selector.items())
        )
    if kind == "v":
        return bool(item == selector)
    return kind == "i" and selector == index


def _prune_list(value: list[Any], fields: dict[str, Any]) -> list[Any]:
    selectors = [
        (path[0], _parse_json(path[2:]), child)
        for path, child in fields.items()
        if len(path) > 2 and path[0] in "kvi" and path[1] == ":"
    ]
    pruned: list[Any] = []
    for index, item in enumerate(value):
        for kind, selector, child in selectors:
            if _element_matches(kind, selector, index, item):
                pruned.append(prune_to_owned(item, child) if isinstance(child, dict) else item)
                break
    return pruned


def prune_to_owned(value: Any, fields: dict[str, Any]) -> Any:
    """The part of ``value`` that the fieldsV1 trie ``fields`` covers (observed order kept)."""
    if not fields:
        return value  # a leaf: the whole value is owned
    if isinstance(value, dict):
        pruned: dict[str, Any] = {}
        for path, child in fields.items():
            if path.startswith("f:"):
                name = path[2:]
                if name in value:
                    pruned[name] = (
                        prune_to_owned(value[name], child) if isinstance(child, dict) else value[name]
                    )
        return pruned
    if isinstance(value, list):
        return _prune_list(value, fields)
    return value  # a scalar where the trie expected structure: keep it, the compare will judge
