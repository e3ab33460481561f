"""A bounded memo of a check of a JSON-like value, keyed by the value's content.

The checks of a pod template (pod_template_rules, pod_security) are pure and cost some hundreds of
microseconds; a controller asks them again for the same template at every reconcile of an unchanged
service (a status change, a pod's readiness, a restart's first pass over a converged cluster). The
key is a 16-byte digest of the value's canonical JSON (some 20 us for a pod template), so a memo of
a few thousand templates holds tens of kilobytes, not the templates."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson

T = TypeVar("T")


class ContentMemo(Generic[T]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[bytes, T] = OrderedDict()

    def get(self, value: Any, extra: str, compute: Callable[[], T]) -> T:
        """`compute()`'s answer for this value (and `extra`, the check's other arguments), computed
        once while it stays among the `size` most recently asked."""
        try:
            canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # not JSON (never from a planner): checked every time
            return compute()
        key = hashlib.blake2b(canonical + b"\0" + extra.encode(), digest_size=16).digest()
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found
        answer = self._entries[key] = compute()
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return answer

    def __len__(self) -> int:
        return len(self._entries)
