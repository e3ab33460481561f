"""Ownership decisions before an apply, from managedFields alone (table-driven; the same steps run
against a real API server in tests/integration/kube/test_kube_it_field_transfer.py)."""

from __future__ import annotations

from typing import Any

import pytest

from llmkube.kube.apply import FieldPolicy
from llmkube.kube.apply.field_transfer import (
    fields_to_hand_over,
    owns,
    takeover_entries,
    takeover_may_be_needed,
)

ME = "llmkube-controller"
NOW = "2026-01-01T00:00:00Z"
STRATEGY = FieldPolicy(exclusive=(("spec", "strategy"),))
ADOPT = FieldPolicy(adopt_from=frozenset({"manager"}))
REPLICAS = FieldPolicy(hand_over=(("spec", "replicas"),))
ROLLING = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


def entry(manager: str, fields: dict[str, Any], operation: str = "Apply", **extra: str) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "apps/v1",
        "time": "2025-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        **extra,
    }


def deployment(spec: dict[str, Any], *entries: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns", "resourceVersion": "7", "managedFields": list(entries)},
        "spec": spec,
    }


def intent(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": spec,
    }


OUR_TYPE = entry(ME, {"f:spec": {"f:strategy": {"f:type": {}}, "f:replicas": {}}})


def test_nothing_to_take_over_without_a_policy() -> None:
    observed = deployment({"strategy": ROLLING}, OUR_TYPE)
    assert (
        takeover_entries(observed, intent({"strategy": {"type": "Recreate"}}), ME, FieldPolicy(), NOW) is None
    )


def test_a_defaulted_block_nobody_owns_in_an_exclusive_subtree_becomes_ours() -> None:
    observed = deployment({"strategy": ROLLING}, OUR_TYPE)
    entries = takeover_entries(observed, intent({"strategy": {"type": "Recreate"}}), ME, STRATEGY, NOW)
    assert entries is not None
    (mine,) = entries
    assert mine["fieldsV1"] == {
        "f:spec": {
            "f:replicas": {},
            "f:strategy": {
                "f:type": {},
                "f:rollingUpdate": {"f:maxSurge": {}, "f:maxUnavailable": {}},
            },
        }
    }
    assert mine["time"] == OUR_TYPE["time"]  # our entry is kept, not replaced


def test_an_exclusive_subtree_we_fully_set_needs_nothing() -> None:
    observed = deployment({"strategy": ROLLING}, OUR_TYPE)
    assert takeover_entries(observed, intent({"strategy": ROLLING}), ME, STRATEGY, NOW) is None


def test_a_stray_we_own_alone_needs_no_takeover_the_apply_removes_it() -> None:
    ours = entry(
        ME, {"f:spec": {"f:strategy": {"f:type": {}, "f:rollingUpdate": {".": {}, "f:maxSurge": {}}}}}
    )
    observed = deployment({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}, ours)
    assert takeover_entries(observed, intent({"strategy": {"type": "Recreate"}}), ME, STRATEGY, NOW) is None


def test_a_stray_someone_else_owns_too_is_taken_from_them() -> None:
    theirs = entry(
        "kubectl-edit", {"f:spec": {"f:strategy": {"f:rollingUpdate": {"f:maxSurge": {}}}}}, "Update"
    )
    other = entry("kubectl-edit", {"f:metadata": {"f:labels": {"f:team": {}}}}, "Update")
    observed = deployment(
        {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}, OUR_TYPE, theirs
    )
    entries = takeover_entries(observed, intent({"strategy": {"type": "Recreate"}}), ME, STRATEGY, NOW)
    assert entries is not None and [e["manager"] for e in entries] == [ME]  # theirs owned nothing else
    observed = deployment(
        {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
        OUR_TYPE,
        {**theirs, "fieldsV1": {**theirs["fieldsV1"], **other["fieldsV1"]}},
    )
    entries = takeover_entries(observed, intent({"strategy": {"type": "Recreate"}}), ME, STRATEGY, NOW)
    assert entries is not None
    assert entries[1]["fieldsV1"] == other["fieldsV1"]  # their label stays theirs


def test_update_entries_of_an_adopted_manager_are_merged_into_ours_once() -> None:
    reference = entry(
        "manager",
        {"f:spec": {"f:revisionHistoryLimit": {}, "f:replicas": {}}, "f:status": {"f:replicas": {}}},
        "Update",
    )
    status_writer = entry(
        "kube-controller-manager", {"f:status": {"f:replicas": {}}}, "Update", subresource="status"
    )
    old_api = {**entry("manager", {"f:spec": {"f:paused": {}}}, "Update"), "apiVersion": "apps/v1beta1"}
    observed = deployment(
        {"replicas": 1, "revisionHistoryLimit": 3}, OUR_TYPE, reference, status_writer, old_api
    )
    entries = takeover_entries(observed, intent({"replicas": 1}), ME, ADOPT, NOW)
    assert entries is not None
    assert [(e["manager"], e.get("subresource"), e["apiVersion"]) for e in entries] == [
        (ME, None, "apps/v1"),
        ("kube-controller-manager", "status", "apps/v1"),
        ("manager", None, "apps/v1beta1"),  # another version's field names: left alone
    ]
    assert entries[0]["fieldsV1"] == {
        "f:spec": {"f:strategy": {"f:type": {}}, "f:replicas": {}, "f:revisionHistoryLimit": {}}
    }  # never status: it is not applied through the object
    # Once merged, nothing is left to adopt.
    observed["metadata"]["managedFields"] = entries
    assert takeover_entries(observed, intent({"replicas": 1}), ME, ADOPT, NOW) is None


def test_without_an_apply_entry_of_ours_one_is_made() -> None:
    reference = entry("manager", {"f:spec": {"f:replicas": {}}}, "Update")
    entries = takeover_entries(deployment({"replicas": 1}, reference), intent({}), ME, ADOPT, NOW)
    assert entries == [
        {
            "manager": ME,
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": NOW,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}},
        }
    ]


@pytest.mark.parametrize(
    ("desired", "owned", "expected"),
    [
        ({}, {"f:spec": {"f:replicas": {}}}, [(("spec", "replicas"), 3)]),  # dropped while ours
        ({"replicas": 3}, {"f:spec": {"f:replicas": {}}}, []),  # still set by us
        ({}, {"f:spec": {"f:template": {}}}, []),  # someone else's already
        ({}, None, []),  # we never applied it
    ],
)
def test_a_field_is_handed_over_only_when_we_drop_it_while_we_own_it(
    desired: dict[str, Any], owned: dict[str, Any] | None, expected: list[Any]
) -> None:
    observed = deployment({"replicas": 3})
    assert fields_to_hand_over(observed, intent(desired), owned, REPLICAS) == expected


def test_owns_follows_the_field_path() -> None:
    trie = {"f:spec": {"f:replicas": {}, "f:strategy": {"f:type": {}}}}
    assert owns(trie, ("spec", "replicas")) and owns(trie, ("spec", "strategy"))
    assert not owns(trie, ("spec", "strategy", "rollingUpdate")) and not owns(None, ("spec",))


@pytest.mark.parametrize(
    ("observed", "desired", "policy", "expected"),
    [
        # A cache copy keeps only our entries: strays are seen from the object itself.
        (deployment({"strategy": ROLLING}, OUR_TYPE), {"strategy": {"type": "Recreate"}}, STRATEGY, True),
        (deployment({"strategy": ROLLING}, OUR_TYPE), {"strategy": ROLLING}, STRATEGY, False),
        (deployment({"replicas": 1}, entry("manager", {}, "Update")), {"replicas": 1}, ADOPT, True),
        (deployment({"replicas": 1}, entry("manager", {}, "Apply")), {"replicas": 1}, ADOPT, False),
        (deployment({"replicas": 1}, OUR_TYPE), {"replicas": 1}, ADOPT, False),
    ],
)
def test_a_takeover_is_looked_for_only_when_the_object_shows_one(
    observed: dict[str, Any], desired: dict[str, Any], policy: FieldPolicy, expected: bool
) -> None:
    assert takeover_may_be_needed(observed, intent(desired), policy) is expected
