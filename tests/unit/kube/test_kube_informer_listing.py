"""A LIST reaches the cache one object at a time: each leaves its page in the form the store keeps
(JSON bytes in a compact store), the changes handed out are parsed one at a time, and what the
handlers and indexes see is what they saw when the whole LIST was kept as dicts."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

import orjson
import pytest
from kube_fakes import FakeApiServer, make_client

from llmkube.kube.cache import Informer
from llmkube.kube.cache.store import Change, Listed, Store, Tombstone, by_label
from llmkube.kube.clock import FakeClock, settle
from llmkube.kube.resource import CONFIG_MAPS

COUNT = 120


def seeded(count: int, *, size: int = 0) -> FakeApiServer:
    server = FakeApiServer()
    for index in range(count):
        data = {f"key-{k}": f"value-{index}-{k}" for k in range(size)}
        server.put("ns", f"cm-{index:04}", data, labels={"shard": str(index % 3)})
    return server


def informer_for(server: FakeApiServer, clock: FakeClock, *, compact: bool) -> Informer:
    return Informer(
        make_client(server, clock),
        CONFIG_MAPS,
        namespace="ns",
        indexers={"shard": by_label("shard")},
        compact=compact,
        clock=clock,
        rng=random.Random(3),
        page_size=25,
    )


def summary(change: Change) -> tuple[str, bool, Any, Any]:
    return change.type, change.initial, change.old_obj, change.new


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compact"])
async def test_the_initial_list_hands_out_every_object_and_fills_the_indexes(compact: bool) -> None:
    server, clock = seeded(COUNT), FakeClock()
    informer = informer_for(server, clock, compact=compact)
    changes: list[Change] = []
    informer.add_handler(changes.append)
    informer.start()
    try:
        await settle(200)
        assert informer.has_synced()
        expected = sorted(server.objects.values(), key=lambda obj: obj["metadata"]["name"])
        assert [summary(change) for change in changes] == [("ADDED", True, None, obj) for obj in expected]
        for shard in ("0", "1", "2"):
            names = [obj["metadata"]["name"] for obj in informer.store.by_index("shard", f"ns/{shard}")]
            assert names == [f"cm-{index:04}" for index in range(COUNT) if str(index % 3) == shard]
        # A handler's copy is its own in a compact store (a plain one shares, as before).
        first = changes[0].new
        assert first is not None
        assert (first is informer.store.get(first["metadata"]["namespace"] + "/cm-0000")) is not compact
    finally:
        await informer.stop()


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compact"])
def test_listed_objects_are_kept_in_the_stores_form(compact: bool) -> None:
    store = Store({"shard": by_label("shard")}, compact=compact)
    obj = {
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {"shard": "1"},
        }
    }
    listed = store.listed(obj)
    assert (listed.key, listed.uid, listed.resource_version) == ("ns/a", "u", "7")
    assert dict(listed.index_values) == {"namespace": ("ns",), "shard": ("ns/1",)}
    assert isinstance(listed.stored, bytes) is compact
    assert orjson.loads(listed.stored) == obj if compact else listed.stored is obj
    (pending,) = store.replace_listed([listed], initial=True)
    assert (pending.type, pending.old, pending.new) == ("ADDED", None, listed.stored)
    assert pending.change() == Change("ADDED", None, obj, True)


def test_an_index_added_after_an_object_was_listed_still_covers_it() -> None:
    store = Store(compact=True)
    listed: list[Listed] = [
        store.listed({"metadata": {"name": "a", "namespace": "ns", "labels": {"t": "x"}}})
    ]
    store.add_index("t", by_label("t"))
    store.replace_listed(listed)
    assert [obj["metadata"]["name"] for obj in store.by_index("t", "ns/x")] == ["a"]


def cm(name: str, *, rv: str = "1", uid: str | None = None, shard: str | None = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid or f"u-{name}", "resourceVersion": rv}
    return {"metadata": meta | ({"labels": {"shard": shard}} if shard else {})}


# (case, cached before, listed now, the changes a relist hands out, the names in shard 1 after)
RELISTS: list[
    tuple[str, list[dict[str, Any]], list[dict[str, Any]], list[tuple[str, Any, Any]], list[str]]
] = [
    ("nothing happened", [cm("a")], [cm("a")], [], ["a"]),
    ("modified", [cm("a")], [cm("a", rv="2")], [("MODIFIED", cm("a"), cm("a", rv="2"))], ["a"]),
    ("deleted unseen", [cm("a"), cm("b")], [cm("b")], [("DELETED", Tombstone("ns/a", cm("a")), None)], ["b"]),
    (
        "recreated under the same name",
        [cm("a", uid="old")],
        [cm("a", uid="new")],
        [("DELETED", Tombstone("ns/a", cm("a", uid="old")), None), ("ADDED", None, cm("a", uid="new"))],
        ["a"],
    ),
    ("added", [], [cm("a")], [("ADDED", None, cm("a"))], ["a"]),
    (
        "relabelled out of the index",
        [cm("a")],
        [cm("a", rv="2", shard=None)],
        [("MODIFIED", cm("a"), cm("a", rv="2", shard=None))],
        [],
    ),
    (
        "relabelled into another shard",
        [cm("a")],
        [cm("a", rv="2", shard="2")],
        [("MODIFIED", cm("a"), cm("a", rv="2", shard="2"))],
        [],
    ),
]


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compact"])
@pytest.mark.parametrize(
    ("case", "before", "now", "expected", "in_shard"), RELISTS, ids=[case[0] for case in RELISTS]
)
def test_a_relist_hands_out_the_difference(
    compact: bool,
    case: str,
    before: list[dict[str, Any]],
    now: list[dict[str, Any]],
    expected: list[tuple[str, Any, Any]],
    in_shard: list[str],
) -> None:
    store = Store({"shard": by_label("shard", namespaced=False)}, compact=compact)
    store.replace_listed([store.listed(obj) for obj in before], initial=True)
    pending = store.replace_listed([store.listed(obj) for obj in now])
    changes = [change.change() for change in pending]
    assert [(change.type, change.old, change.new) for change in changes] == expected, case
    assert not any(change.initial for change in changes)
    assert [obj["metadata"]["name"] for obj in store.by_index("shard", "1")] == in_shard, case
    assert sorted(store.keys()) == sorted(f"ns/{obj['metadata']['name']}" for obj in now)


async def test_a_compact_initial_list_never_holds_every_object_as_a_dict() -> None:
    # 400 objects of ~5 KB of JSON (~20 KB each as dicts): the LIST's transient memory stays near
    # what the compact store keeps, not near the parsed objects' size.
    server, clock = seeded(400, size=120), FakeClock()
    informer = informer_for(server, clock, compact=True)
    keys: list[str] = []
    informer.add_handler(lambda change: keys.append(change.obj["metadata"]["name"]))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        informer.start()
        await settle(400)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await informer.stop()
    assert informer.has_synced() and len(keys) == 400
    dicts = 400 * _dict_size(next(iter(server.objects.values())))
    # Above what the store keeps: a few pages in flight (was: every object as a dict, ~6 MB).
    assert peak - held < dicts / 2, (peak - held, held - before, dicts)


def _dict_size(obj: dict[str, Any]) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        copy = orjson.loads(orjson.dumps(obj))
        size = tracemalloc.get_traced_memory()[0] - before
        del copy
    finally:
        tracemalloc.stop()
    return size


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compact"])
@pytest.mark.parametrize(
    ("index", "value"),
    [("shard", "1"), ("shard", "2"), ("shard", "none"), ("namespace", "ns"), ("namespace", "x")],
)
def test_keys_by_index_names_what_by_index_returns(compact: bool, index: str, value: str) -> None:
    store = Store({"shard": by_label("shard", namespaced=False)}, compact=compact)
    store.replace([cm("b"), cm("a"), cm("c", shard="2"), cm("d", shard=None)])
    expected = [
        f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" for obj in store.by_index(index, value)
    ]
    assert store.keys_by_index(index, value) == expected
    with pytest.raises(KeyError, match="no index"):
        store.keys_by_index("missing", value)
