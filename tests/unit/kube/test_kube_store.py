from __future__ import annotations

from typing import Any

import pytest

from llmkube.kube.cache.lines import LineSplitter, LineTooLong
from llmkube.kube.cache.store import (
    BY_CONTROLLER_UID,
    BY_NAMESPACE,
    Change,
    Store,
    Tombstone,
    by_controller_uid,
    by_field,
    by_label,
    object_key,
)
from llmkube.kube.cache.transform import strip_for_cache


def obj(
    name: str,
    namespace: str | None = "ns",
    rv: str = "1",
    uid: str | None = None,
    labels: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "uid": uid or f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    if owners:
        meta["ownerReferences"] = owners
    return {"metadata": meta, "spec": spec or {}}


def test_keys_follow_client_go() -> None:
    assert object_key(obj("a")) == "ns/a"
    assert object_key(obj("pc", namespace=None)) == "pc"


# Every store behaviour holds for the compact store (objects kept as JSON bytes) too.
both = pytest.mark.parametrize("compact", [False, True], ids=["dicts", "compact"])


@both
def test_indexes_follow_updates_and_deletes(compact: bool) -> None:
    store = Store({"model": by_field("spec", "modelRef"), "app": by_label("app")}, compact=compact)
    store.upsert(obj("isvc-1", spec={"modelRef": "llama"}, labels={"app": "x"}))
    store.upsert(obj("isvc-2", spec={"modelRef": "llama"}))
    store.upsert(obj("isvc-3", namespace="other", spec={"modelRef": "llama"}))
    assert [o["metadata"]["name"] for o in store.by_index("model", "ns/llama")] == ["isvc-1", "isvc-2"]
    assert [o["metadata"]["name"] for o in store.by_index("model", "other/llama")] == ["isvc-3"]
    assert [o["metadata"]["name"] for o in store.by_index(BY_NAMESPACE, "ns")] == ["isvc-1", "isvc-2"]
    assert [o["metadata"]["name"] for o in store.by_index("app", "ns/x")] == ["isvc-1"]
    store.upsert(obj("isvc-1", rv="2", spec={"modelRef": "mistral"}))
    assert [o["metadata"]["name"] for o in store.by_index("model", "ns/llama")] == ["isvc-2"]
    assert store.by_index("app", "ns/x") == []
    store.delete("ns/isvc-2")
    assert store.by_index("model", "ns/llama") == []
    assert store.index_values("model") == ["ns/mistral", "other/llama"]


def test_by_field_accepts_an_object_reference_with_a_name() -> None:
    index = by_field("spec", "modelRef")
    assert list(index(obj("a", spec={"modelRef": {"name": "m"}}))) == ["ns/m"]
    assert list(index(obj("a", spec={"modelRef": ""}))) == []
    assert list(index(obj("a", spec={"modelRef": 5}))) == []
    assert list(by_field("spec", "modelRef", namespaced=False)(obj("a", spec={"modelRef": "m"}))) == ["m"]


@both
def test_controller_owner_index_uses_only_the_controller_reference(compact: bool) -> None:
    store = Store({BY_CONTROLLER_UID: by_controller_uid}, compact=compact)
    store.upsert(
        obj("d", owners=[{"uid": "owner-a", "controller": False}, {"uid": "owner-b", "controller": True}])
    )
    assert store.by_index(BY_CONTROLLER_UID, "owner-a") == []
    assert [o["metadata"]["name"] for o in store.by_index(BY_CONTROLLER_UID, "owner-b")] == ["d"]


@both
def test_an_index_added_later_covers_existing_objects(compact: bool) -> None:
    store = Store(compact=compact)
    store.upsert(obj("a", labels={"tier": "gpu"}))
    store.add_index("tier", by_label("tier", namespaced=False))
    assert [o["metadata"]["name"] for o in store.by_index("tier", "gpu")] == ["a"]
    with pytest.raises(ValueError, match="already exists"):
        store.add_index("tier", by_label("tier"))
    with pytest.raises(KeyError, match="no index"):
        store.by_index("missing", "x")


@both
def test_replace_reports_the_difference_with_tombstones(compact: bool) -> None:
    store = Store(compact=compact)
    store.replace([obj("same"), obj("changed"), obj("gone"), obj("recreated", uid="old")], initial=True)
    changes = store.replace([obj("same"), obj("changed", rv="2"), obj("new"), obj("recreated", uid="new")])
    summary = [(c.type, c.obj["metadata"]["name"], isinstance(c.old, Tombstone)) for c in changes]
    assert summary == [
        ("DELETED", "gone", True),
        ("MODIFIED", "changed", False),
        ("ADDED", "new", False),
        ("DELETED", "recreated", True),
        ("ADDED", "recreated", False),
    ]
    assert sorted(store.keys()) == ["ns/changed", "ns/new", "ns/recreated", "ns/same"]


def test_a_compact_store_returns_equal_fresh_copies() -> None:
    plain, compact = Store(), Store(compact=True)
    for store in (plain, compact):
        store.upsert(obj("a", labels={"app": "x"}, spec={"n": 1, "list": [1, "two", None, True]}))
        previous = store.upsert(obj("a", rv="2", labels={"app": "x"}, spec={"n": 2}))
        assert previous == obj("a", labels={"app": "x"}, spec={"n": 1, "list": [1, "two", None, True]})
    assert compact.get("ns/a") == plain.get("ns/a") == obj("a", rv="2", labels={"app": "x"}, spec={"n": 2})
    assert compact.objects() == plain.objects() and list(compact) == list(plain)
    first = compact.get("ns/a")
    assert first is not None
    first["spec"]["n"] = 99  # a reader's change never reaches the cache
    assert compact.get_object("ns", "a") == plain.get("ns/a")
    assert compact.delete("ns/a") == plain.delete("ns/a")
    assert len(compact) == 0 and compact.get("ns/a") is None


def test_change_accessors() -> None:
    tomb = Tombstone("ns/a", obj("a"))
    change = Change("DELETED", tomb, None)
    assert change.obj is tomb.obj and change.old_obj is tomb.obj
    added = Change("ADDED", None, obj("b"))
    assert added.obj["metadata"]["name"] == "b" and added.old_obj is None


def test_strip_for_cache_keeps_our_managed_fields_and_who_else_updated_the_object() -> None:
    transform = strip_for_cache("me")
    one = obj("a")
    ours = [
        {"manager": "me", "operation": "Apply", "fieldsV1": {"f:data": {}}},
        {"manager": "me", "operation": "Apply", "subresource": "status", "fieldsV1": {"f:status": {}}},
    ]
    one["metadata"]["managedFields"] = [
        {"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:data": {}}},
        *ours,
        {
            "manager": "manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "t",
            "fieldsV1": {"f:a": {}},
        },
        {"manager": "kubelet", "operation": "Update", "subresource": "status", "fieldsV1": {"f:status": {}}},
    ]
    assert transform(one)["metadata"]["managedFields"] == [
        *ours,
        {"manager": "manager", "operation": "Update", "apiVersion": "v1"},  # a stub: no field set
    ]
    two = obj("b")
    two["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply"}]
    assert "managedFields" not in transform(two)["metadata"]


LINES = [
    # (chunks, expected lines, leftover)
    ([b'{"a":1}\n{"b":2}\n'], [b'{"a":1}', b'{"b":2}'], None),
    ([b'{"a":', b"1}\n"], [b'{"a":1}'], None),
    ([b'{"a":1}\n\n\n', b'{"b"', b":2}"], [b'{"a":1}'], b'{"b":2}'),
    ([b"x" * 10, b"y" * 10, b"\nz\n"], [b"x" * 10 + b"y" * 10, b"z"], None),
    ([b"\r\n"], [], None),
]


@pytest.mark.parametrize(("chunks", "expected", "leftover"), LINES)
def test_line_splitter(chunks: list[bytes], expected: list[bytes], leftover: bytes | None) -> None:
    splitter = LineSplitter()
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    assert lines == expected
    assert splitter.flush() == leftover


def test_line_splitter_handles_megabyte_lines_and_enforces_its_bound() -> None:
    splitter = LineSplitter(max_line=3 * 1024 * 1024)
    big = b"a" * (2 * 1024 * 1024)
    lines = []
    for offset in range(0, len(big), 65536):
        lines += splitter.feed(big[offset : offset + 65536])
    lines += splitter.feed(b"\n")
    assert lines == [big]
    with pytest.raises(LineTooLong):
        for _ in range(100):
            splitter.feed(b"b" * 65536)


@both
@pytest.mark.parametrize(
    ("index", "value"),
    [("app", "ns/x"), ("app", "ns/y"), ("app", "ns/none"), ("namespace", "ns"), ("namespace", "z")],
)
def test_keys_by_index_names_what_by_index_returns(compact: bool, index: str, value: str) -> None:
    store = Store({"app": by_label("app")}, compact=compact)
    for name, app in (("b", "x"), ("a", "x"), ("c", "y"), ("d", None)):
        store.upsert(obj(name, labels={"app": app} if app else {}))
    expected = [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in store.by_index(index, value)]
    assert store.keys_by_index(index, value) == expected
    with pytest.raises(KeyError, match="no index"):
        store.keys_by_index("missing", value)
