"""The compact store (objects kept as JSON bytes, parsed on read) against the plain one: the same
objects, in the same order, through every accessor; fresh copies; exactly sized bytes."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from llmkube.kube.cache import Store, by_label


def obj(name: str, **fields: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "resourceVersion": "1", "uid": f"u-{name}"}
    return {"metadata": meta} | fields


# Values whose JSON form is easy to get wrong: every one must come back equal, of the same type,
# with dict keys in the same order (the owned-fields compare and the planner see what was cached).
ROUND_TRIPS: list[tuple[str, dict[str, Any]]] = [
    ("empty containers", obj("a", spec={}, data={"list": [], "dict": {}, "nested": [[], [{}]]})),
    ("unicode and escapes", obj("a", data={"名前": "🚀 ünïcode", "quote": 'a"b', "esc": "a\\b\nc\td\u0000"})),
    ("integers at the 64-bit edges", obj("a", spec={"max": 2**63 - 1, "min": -(2**63), "zero": 0})),
    ("floats", obj("a", spec={"tenth": 0.1, "tiny": 1e-7, "huge": 1.5e300, "negative": -2.5})),
    ("bools and nulls", obj("a", spec={"yes": True, "no": False, "none": None, "list": [None, True, 0]})),
    ("key order", obj("a", spec={"z": 1, "a": 2, "m": {"y": 1, "b": 2}})),
    (
        "a Deployment-like object",
        obj(
            "a",
            spec={
                "replicas": 3,
                "template": {
                    "spec": {
                        "containers": [{"name": "s", "args": ["--ctx", "4096"], "resources": {"limits": {}}}]
                    }
                },
            },
            status={"replicas": 3, "readyReplicas": 2},
        ),
    ),
]


@pytest.mark.parametrize(("case", "value"), ROUND_TRIPS, ids=[case for case, _ in ROUND_TRIPS])
def test_a_compact_store_reads_back_what_a_plain_store_holds(case: str, value: dict[str, Any]) -> None:
    plain, compact = Store({"app": by_label("app")}), Store({"app": by_label("app")}, compact=True)
    for store in (plain, compact):
        store.upsert(value)
    read = compact.get("ns/a")
    assert read == plain.get("ns/a") == value, case
    assert orjson.dumps(read) == orjson.dumps(value), "types and key order survive"
    assert compact.objects() == plain.objects() and compact.by_index("namespace", "ns") == [value]


def _bytes_held(build: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        held = tracemalloc.get_traced_memory()[0] - before
        del kept
    finally:
        tracemalloc.stop()
    return held


def test_a_compact_store_holds_about_the_json_length_per_object() -> None:
    # A 6 KB object: orjson's own output would keep its over-allocated buffer (~64 KB); the store
    # keeps exactly sized bytes, a fraction of the parsed dicts.
    big = obj("a", spec={f"key-{index}": "v" * 20 for index in range(200)})
    length = len(orjson.dumps(big))
    count = 50

    def fill(compact: bool) -> Store:
        store = Store(compact=compact)
        for index in range(count):
            store.upsert(orjson.loads(orjson.dumps(big | {"metadata": {"name": f"o-{index}"}})))
        return store

    compact_per_object = _bytes_held(lambda: fill(True)) / count
    plain_per_object = _bytes_held(lambda: fill(False)) / count
    assert compact_per_object < length * 1.2, (compact_per_object, length)
    assert compact_per_object < plain_per_object / 2, (compact_per_object, plain_per_object)


# Every way a reader gets an object from the store: each hands out a copy of its own.
READERS: list[tuple[str, Callable[[Store], dict[str, Any]]]] = [
    ("get", lambda store: store.get("ns/a") or {}),
    ("get_object", lambda store: store.get_object("ns", "a") or {}),
    ("objects", lambda store: store.objects()[0]),
    ("iteration", lambda store: next(iter(store))),
    ("by_index", lambda store: store.by_index("app", "ns/x")[0]),
    ("upsert's previous object", lambda store: store.upsert(obj("a", spec={"n": 1}, v=2)) or {}),
    ("delete's old object", lambda store: store.delete("ns/a") or {}),
]


@pytest.mark.parametrize("read", [read for _, read in READERS], ids=[name for name, _ in READERS])
def test_a_readers_change_never_reaches_a_compact_store(read: Callable[[Store], dict[str, Any]]) -> None:
    original = obj("a", spec={"n": 1})
    original["metadata"]["labels"] = {"app": "x"}
    store = Store({"app": by_label("app")}, compact=True)
    store.upsert(original)
    first = read(store)
    assert first["spec"] == {"n": 1}
    first["spec"]["n"] = 99
    first["metadata"]["labels"]["app"] = "changed"
    assert original["spec"] == {"n": 1}, "the caller's object is not shared either"
    for kept in store.objects():
        assert kept["spec"] == {"n": 1}
        assert kept["metadata"].get("labels", {}).get("app") in (None, "x")
