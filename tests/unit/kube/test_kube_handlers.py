"""Predicates and event-to-key mappers (controller-runtime's handler and predicate packages)."""

from __future__ import annotations

from typing import Any

import pytest

from llmkube.kube.cache.store import Change, Tombstone
from llmkube.kube.control.handlers import enqueue_by_label, enqueue_mapped, enqueue_object, enqueue_owner
from llmkube.kube.control.predicates import (
    all_of,
    annotations_changed,
    any_of,
    deleted,
    generation_changed,
    has_labels,
    labels_changed,
    negate,
    resource_version_changed,
)
from llmkube.kube.resource import Resource
from llmkube.kube.types import ObjectKey

ISVC = Resource("inference.llmkube.dev", "v1alpha1", "inferenceservices", "InferenceService")
CLUSTER_OWNER = Resource("example.com", "v1", "clusterthings", "ClusterThing", namespaced=False)


def obj(name: str = "x", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", **meta}}


def ref(
    kind: str, name: str, api_version: str = "inference.llmkube.dev/v1alpha1", controller: bool = True
) -> Any:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": f"uid-{name}",
        "controller": controller,
    }


PREDICATES = {
    "generation: bumped": (
        generation_changed, "MODIFIED", obj(generation=1), obj(generation=2), True
    ),
    "generation: status-only write": (
        generation_changed, "MODIFIED", obj(generation=2), obj(generation=2), False
    ),
    "generation: adds always pass": (
        generation_changed, "ADDED", None, obj(generation=2), True
    ),
    "generation: deletes always pass": (
        generation_changed, "DELETED", obj(generation=2), None, True
    ),
    "rv: resync": (
        resource_version_changed, "MODIFIED", obj(resourceVersion="1"), obj(resourceVersion="1"), False
    ),
    "rv: moved": (
        resource_version_changed, "MODIFIED", obj(resourceVersion="1"), obj(resourceVersion="2"), True
    ),
    "labels: same": (
        labels_changed, "MODIFIED", obj(labels={"a": "1"}), obj(labels={"a": "1"}), False
    ),
    "labels: changed": (
        labels_changed, "MODIFIED", obj(labels={"a": "1"}), obj(labels={"a": "2"}), True
    ),
    "labels: removed": (
        labels_changed, "MODIFIED", obj(labels={"a": "1"}), obj(), True
    ),
    "annotations: changed": (
        annotations_changed, "MODIFIED", obj(), obj(annotations={"b": "1"}), True
    ),
    "annotations: same": (
        annotations_changed, "MODIFIED", obj(annotations={"b": "1"}), obj(annotations={"b": "1"}), False
    ),
    "has_labels: new matches": (
        has_labels({"mirror": "yes"}), "ADDED", None, obj(labels={"mirror": "yes"}), True
    ),
    "has_labels: label removed, old matched": (
        has_labels({"mirror": "yes"}), "MODIFIED", obj(labels={"mirror": "yes"}), obj(), True
    ),
    "has_labels: never matched": (
        has_labels({"mirror": "yes"}), "ADDED", None, obj(labels={"mirror": "no"}), False
    ),
    "has_labels: tombstone": (
        has_labels({"m": "y"}), "DELETED", Tombstone("ns/x", obj(labels={"m": "y"})), None, True
    ),
    "all_of": (
        all_of(labels_changed, annotations_changed), "MODIFIED", obj(), obj(labels={"a": "1"}), False
    ),
    "any_of": (
        any_of(labels_changed, annotations_changed), "MODIFIED", obj(), obj(labels={"a": "1"}), True
    ),
    "negate": (
        negate(labels_changed), "MODIFIED", obj(), obj(labels={"a": "1"}), False
    ),
    "deleted: a delete": (
        deleted, "DELETED", obj(), None, True
    ),
    "deleted: a tombstone": (
        deleted, "DELETED", Tombstone("ns/x", obj()), None, True
    ),
    "deleted: an add": (
        deleted, "ADDED", None, obj(), False
    ),
    "deleted: an update": (
        deleted, "MODIFIED", obj(), obj(), False
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("predicate", "kind", "old", "new", "expected"), list(PREDICATES.values()), ids=list(PREDICATES)
)
def test_predicates(predicate: Any, kind: str, old: Any, new: Any, expected: bool) -> None:
    assert predicate(Change(kind, old, new)) is expected


def keys(mapper: Any, kind: str, old: Any, new: Any) -> list[ObjectKey]:
    return list(mapper(Change(kind, old, new)))


def test_enqueue_object_uses_the_object_or_its_tombstone() -> None:
    assert keys(enqueue_object, "ADDED", None, obj("a")) == [ObjectKey("ns", "a")]
    assert keys(enqueue_object, "DELETED", Tombstone("ns/b", obj("b")), None) == [ObjectKey("ns", "b")]
    cluster = {"metadata": {"name": "pc"}}
    assert keys(enqueue_object, "ADDED", None, cluster) == [ObjectKey("", "pc")]


OWNER_CASES = {
    "controller owner of the right group/kind": ([ref("InferenceService", "svc")], [ObjectKey("ns", "svc")]),
    "version is ignored": (
        [ref("InferenceService", "svc", "inference.llmkube.dev/v1")],
        [ObjectKey("ns", "svc")],
    ),
    "other kind": ([ref("Model", "m")], []),
    "same kind, other group": ([ref("InferenceService", "svc", "other.io/v1")], []),
    "non-controller reference": ([ref("InferenceService", "svc", controller=False)], []),
    "no owners": ([], []),
}


@pytest.mark.parametrize(("owners", "expected"), list(OWNER_CASES.values()), ids=list(OWNER_CASES))
def test_enqueue_owner(owners: list[Any], expected: list[ObjectKey]) -> None:
    assert keys(enqueue_owner(ISVC), "ADDED", None, obj(ownerReferences=owners)) == expected


def test_enqueue_owner_can_include_non_controller_references() -> None:
    owners = [ref("InferenceService", "a", controller=False), ref("InferenceService", "b")]
    mapper = enqueue_owner(ISVC, only_controller=False)
    assert keys(mapper, "ADDED", None, obj(ownerReferences=owners)) == [
        ObjectKey("ns", "a"),
        ObjectKey("ns", "b"),
    ]


def test_enqueue_owner_on_update_wakes_old_and_new_owner_once() -> None:
    old = obj(ownerReferences=[ref("InferenceService", "before")])
    new = obj(ownerReferences=[ref("InferenceService", "after")])
    assert keys(enqueue_owner(ISVC), "MODIFIED", old, new) == [
        ObjectKey("ns", "before"),
        ObjectKey("ns", "after"),
    ]
    same = obj(ownerReferences=[ref("InferenceService", "same")])
    assert keys(enqueue_owner(ISVC), "MODIFIED", same, same) == [ObjectKey("ns", "same")]


def test_enqueue_owner_of_a_cluster_scoped_kind_has_no_namespace() -> None:
    child = obj(ownerReferences=[ref("ClusterThing", "big", "example.com/v1")])
    assert keys(enqueue_owner(CLUSTER_OWNER), "ADDED", None, child) == [ObjectKey("", "big")]


def test_enqueue_mapped_and_by_label() -> None:
    mapper = enqueue_mapped(lambda o: [ObjectKey("ns", f"{o['metadata']['name']}-owner")])
    assert keys(mapper, "MODIFIED", obj("a"), obj("a")) == [ObjectKey("ns", "a-owner")]
    by_label = enqueue_by_label("inference.llmkube.dev/service")
    labelled = {"metadata": {"name": "pc", "labels": {"inference.llmkube.dev/service": "team/svc"}}}
    assert keys(by_label, "ADDED", None, labelled) == [ObjectKey("team", "svc")]
    in_ns = obj(labels={"inference.llmkube.dev/service": "svc"})
    assert keys(by_label, "ADDED", None, in_ns) == [ObjectKey("ns", "svc")]
    assert keys(by_label, "ADDED", None, obj()) == []
    moved = keys(by_label, "MODIFIED", obj(labels={"inference.llmkube.dev/service": "a"}),
                 obj(labels={"inference.llmkube.dev/service": "b"}))  # fmt: skip
    assert moved == [ObjectKey("ns", "a"), ObjectKey("ns", "b")]
