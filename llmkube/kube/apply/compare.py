"""Decide whether an apply would change anything: compare what we want with what we own.

``needs_apply(desired, observed, manager)`` prunes the observed object to the fields our manager
owns (managed_fields.py) and compares it with the desired object after normalising both the way
the API server would store them.  Equal means the server already holds our intent: send nothing.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import orjson

from llmkube.apimachinery.quantity import Quantity, QuantityError, parse_quantity
from llmkube.kube.managed_fields import owned_fields, prune_to_owned
from llmkube.kube.types import Obj

__all__ = ["clean_intent", "differences", "needs_apply", "normalise", "quantity_value", "strip_identity"]

#: Empty maps whose mere presence means something (an emptyDir volume, "select everything");
#: every other empty map or list is dropped, as the server drops it (``omitempty``).
PRESERVE_EMPTY = frozenset({"emptyDir", "podSelector", "namespaceSelector", "selector"})

#: Maps whose values are resource quantities ("500m" == "0.5", "1Gi" == "1073741824").
QUANTITY_MAPS = frozenset({"limits", "requests", "capacity", "allocatable", "hard", "used"})
#: Single fields holding a quantity, by (parent key, key); None matches any parent.
QUANTITY_FIELDS = frozenset({(None, "sizeLimit"), ("target", "averageValue"), ("target", "value")})
#: IntOrString fields: a numeric string and the number are the same port/count.
INT_OR_STRING_FIELDS = frozenset({"targetPort", "port", "maxSurge", "maxUnavailable", "minAvailable"})


def _quantity(value: Any) -> Quantity | None:
    """A quantity as the API server reads it from JSON (a string, surrounding spaces trimmed, or a
    number), or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        return parse_quantity(value.strip() if isinstance(value, str) else str(value))
    except QuantityError:
        return None


def quantity_value(value: Any) -> Fraction | None:
    """The numeric value of a Kubernetes quantity, or None when it is not one."""
    quantity = _quantity(value)
    return None if quantity is None else quantity.value


@functools.lru_cache(maxsize=4096)  # every compare meets the same few quantities again
def _quantity_key(value: str | int | float) -> str | None:
    quantity = _quantity(value)
    return None if quantity is None else f"quantity:{quantity.plain()}"


def _canonical_quantity(value: Any) -> Any:
    # Equal values compare equal whatever their spelling ("500m" and "0.5", "1Gi" and "1024Mi").
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return value
    key = _quantity_key(value)
    return value if key is None else key


def _int_or_string(value: Any) -> Any:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def normalise(value: Any, key: str | None = None, parent: str | None = None) -> Any:
    """Drop nulls and empty collections, canonicalise quantities and numeric IntOrStrings."""
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        for name, item in value.items():
            normalised = normalise(item, name, key)
            if normalised is None:
                continue
            if normalised == {} and name not in PRESERVE_EMPTY:
                continue
            if normalised == []:
                continue
            result[name] = normalised
        return result
    if isinstance(value, list):
        return [normalised for item in value if (normalised := normalise(item, None, key)) is not None]
    if value is None:
        return None
    if parent in QUANTITY_MAPS or (parent, key) in QUANTITY_FIELDS or (None, key) in QUANTITY_FIELDS:
        return _canonical_quantity(value)
    if key in INT_OR_STRING_FIELDS:
        return _int_or_string(value)
    return value


def strip_identity(obj: Obj, *, keep_status: bool = False) -> Obj:
    """What fieldsV1 never records: apiVersion, kind, metadata name/namespace and server-set
    metadata; and ``status`` unless comparing a status apply."""
    result = {name: value for name, value in obj.items() if name not in ("apiVersion", "kind")}
    if not keep_status:
        result.pop("status", None)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        result["metadata"] = {
            name: value
            for name, value in meta.items()
            if name
            not in (
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "managedFields",
            )
        }
    return result


def differences(desired: Any, observed: Any, path: str = "", limit: int = 10) -> list[str]:
    """Paths where two normalised values differ (for logs: why a write was needed)."""
    found: list[str] = []

    def walk(left: Any, right: Any, where: str) -> None:
        if len(found) >= limit:
            return
        if isinstance(left, dict) and isinstance(right, dict):
            for name in sorted(set(left) | set(right)):
                walk(left.get(name, _MISSING), right.get(name, _MISSING), f"{where}.{name}")
        elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
            for index, (one, two) in enumerate(zip(left, right, strict=True)):
                walk(one, two, f"{where}[{index}]")
        elif left != right or (type(left) is not type(right) and not _same_number(left, right)):
            found.append(where or ".")

    walk(desired, observed, path)
    return found


_MISSING = object()


def _same_number(left: Any, right: Any) -> bool:
    numbers = (int, float)
    return (
        isinstance(left, numbers)
        and isinstance(right, numbers)
        and not isinstance(left, bool)
        and not isinstance(right, bool)
        and left == right
    )


def needs_apply(desired: Obj, observed: Obj | None, manager: str, *, subresource: str = "") -> list[str]:
    """Why ``desired`` must be applied over ``observed``; an empty list means it need not be.

    ``subresource="status"`` compares only ``status`` against the manager's status entry."""
    if observed is None:
        return ["the object does not exist yet"]
    status = subresource == "status"
    fields = owned_fields(observed, manager, subresource)
    if fields is None:
        want = normalise(strip_identity(desired, keep_status=status))
        # The server keeps no entry for a manager that owns nothing: an empty intent is satisfied.
        if not (want.get("status") if status else want):
            return []
        return [f"{manager} has not applied {subresource or 'it'} yet"]
    wanted = strip_identity(desired, keep_status=status)
    owned = prune_to_owned(strip_identity(observed, keep_status=status), fields)
    if status:
        wanted, owned = {"status": wanted.get("status", {})}, {"status": owned.get("status", {})}
    if identical(wanted, owned):
        return []  # the usual answer for a converged object, without normalising either side
    want, have = normalise(wanted), normalise(owned)
    if status:
        want, have = {"status": want.get("status", {})}, {"status": have.get("status", {})}
    return differences(want, have)


def identical(left: Any, right: Any) -> bool:
    """Equal JSON with equal types (``1`` is not ``1.0`` nor ``True``; key order aside): then the
    normalised values are equal too. False also when either is not plain JSON."""
    try:
        return orjson.dumps(left, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            right, option=orjson.OPT_SORT_KEYS
        )
    except TypeError:
        return False


def clean_intent(obj: Obj, *, keep_status: bool = False) -> Obj:
    """The body to apply: nulls and meaningless empty collections removed (``normalise`` minus the
    value canonicalisation, so quantities go out exactly as written)."""
    cleaned = _drop_empty(obj)
    if not keep_status:
        cleaned.pop("status", None)
    return cleaned


def _drop_empty(value: Obj) -> Obj:
    result: Obj = {}
    for name, item in value.items():
        if isinstance(item, dict):
            item = _drop_empty(item)
            if not item and name not in PRESERVE_EMPTY:
                continue
        elif isinstance(item, list):
            item = [
                _drop_empty(element) if isinstance(element, dict) else element
                for element in item
                if element is not None
            ]
            if not item:
                continue
        elif item is None:
            continue
        result[name] = item
    return result
