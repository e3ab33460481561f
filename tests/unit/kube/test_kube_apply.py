"""The Applier's decisions and requests, against a scripted transport."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from kube_fakes import RecordingTransport, Reply, status_body

from llmkube.kube.apply import FieldPolicy
from llmkube.kube.apply.applier import Applier, ApplyOutcome
from llmkube.kube.errors import Invalid
from llmkube.kube.resource import CONFIG_MAPS, PRIORITY_CLASSES
from llmkube.kube.rest import APPLY_PATCH, ApiClient

ME = "llmkube-controller"


def config_map(data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns"},
        "data": data,
    }


def stored(data: dict[str, str], *, owned: list[str] | None = None, uid: str = "uid-1") -> dict[str, Any]:
    obj = config_map(data)
    obj["metadata"].update(uid=uid, resourceVersion="5")
    fields = {"f:data": {f"f:{key}": {} for key in (owned if owned is not None else data)}}
    obj["metadata"]["managedFields"] = [
        {"manager": ME, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields}
    ]
    return obj


def applier(*replies: Reply) -> tuple[Applier, RecordingTransport]:
    transport = RecordingTransport(list(replies))
    return Applier(ApiClient("https://h:1", transport=transport)), transport


async def test_unchanged_objects_cause_no_request_at_all() -> None:
    apply, transport = applier()
    result = await apply.apply(
        CONFIG_MAPS, config_map({"a": "1"}), stored({"a": "1", "theirs": "x"}, owned=["a"])
    )
    assert result.outcome is ApplyOutcome.UNCHANGED and not result.changed
    assert transport.seen == []


async def test_missing_objects_are_created() -> None:
    apply, transport = applier(Reply(201, stored({"a": "1"})))
    result = await apply.apply(CONFIG_MAPS, config_map({"a": "1"}), None)
    assert result.outcome is ApplyOutcome.CREATED
    method, url, headers, body = transport.seen[0]
    assert (method, headers["Content-Type"]) == ("PATCH", APPLY_PATCH)
    assert url.endswith("/api/v1/namespaces/ns/configmaps/cm?fieldManager=llmkube-controller&force=true")
    assert orjson.loads(body or b"") == config_map({"a": "1"})


async def test_a_create_not_yet_in_the_cache_is_not_sent_again_until_the_cache_shows_the_object() -> None:
    apply, transport = applier(Reply(201, stored({"a": "1"})), Reply(200, stored({"a": "1"})))
    apply.recent.follow(str(CONFIG_MAPS))  # an informer of ConfigMaps reports what the cache sees
    await apply.apply(CONFIG_MAPS, config_map({"a": "1"}), None)
    again = await apply.apply(CONFIG_MAPS, config_map({"a": "1"}), None)  # the watch is behind
    assert again.outcome is ApplyOutcome.UNCHANGED and again.object == stored({"a": "1"})
    assert len(transport.seen) == 1
    # Another body is sent at once; after any event of the object (here: it was deleted) the
    # usual decision holds: the cache shows none, so it is created again.
    apply.recent.seen((str(CONFIG_MAPS), "ns", "cm"))
    recreated = await apply.apply(CONFIG_MAPS, config_map({"a": "1"}), None)
    assert recreated.changed and len(transport.seen) == 2


async def test_a_create_of_a_resource_no_informer_follows_is_not_remembered() -> None:
    apply, transport = applier(Reply(201, stored({"a": "1"})), Reply(200, stored({"a": "1"})))
    await apply.apply(CONFIG_MAPS, config_map({"a": "1"}), None)
    await apply.apply(CONFIG_MAPS, config_map({"a": "1"}), None)
    assert len(transport.seen) == 2


async def test_changed_objects_are_applied_with_the_reason() -> None:
    apply, transport = applier(Reply(200, stored({"a": "2"})))
    result = await apply.apply(CONFIG_MAPS, config_map({"a": "2"}), stored({"a": "1"}))
    assert result.outcome is ApplyOutcome.UPDATED
    assert result.reasons == [".data.a"]
    assert len(transport.seen) == 1


async def test_the_intent_is_cleaned_before_sending() -> None:
    apply, transport = applier(Reply(200, stored({"a": "1"})))
    desired = config_map({"a": "1"})
    desired["metadata"]["labels"] = {}
    desired["metadata"]["annotations"] = None
    desired["status"] = {"ignored": True}
    del desired["apiVersion"]
    await apply.apply(CONFIG_MAPS, desired, None)
    assert orjson.loads(transport.seen[0][3] or b"") == config_map({"a": "1"})


IMMUTABLE = status_body(
    422,
    "Invalid",
    'PriorityClass.scheduling.k8s.io "high" is invalid: value: Forbidden: may not be changed in an update.',
    causes=[
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: may not be changed in an update.",
            "field": "value",
        }
    ],
)


IMMUTABLE_VALUE = FieldPolicy(recreate_on=frozenset({"value"}))


def priority_class(value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": value,
    }


async def test_an_immutable_field_change_deletes_with_a_uid_precondition_and_recreates() -> None:
    observed = priority_class(100)
    observed["metadata"].update(
        uid="pc-uid", managedFields=[{"manager": ME, "operation": "Apply", "fieldsV1": {"f:value": {}}}]
    )
    apply, transport = applier(
        Reply(422, IMMUTABLE),
        Reply(200, {"kind": "Status", "status": "Success"}),
        Reply(201, priority_class(200)),
    )
    result = await apply.apply(PRIORITY_CLASSES, priority_class(200), observed, policy=IMMUTABLE_VALUE)
    assert result.outcome is ApplyOutcome.RECREATED
    assert [(seen[0], seen[1].split("?")[0]) for seen in transport.seen] == [
        ("PATCH", "https://h:1/apis/scheduling.k8s.io/v1/priorityclasses/high"),
        ("DELETE", "https://h:1/apis/scheduling.k8s.io/v1/priorityclasses/high"),
        ("PATCH", "https://h:1/apis/scheduling.k8s.io/v1/priorityclasses/high"),
    ]
    delete_options = orjson.loads(transport.seen[1][3] or b"")
    assert delete_options["preconditions"] == {"uid": "pc-uid"}
    assert delete_options["propagationPolicy"] == "Background"


async def test_no_recreate_of_an_object_the_cache_has_not_seen() -> None:
    """No cached copy, no uid to guard the delete with: the 422 is raised (the retry has the cache),
    and nothing is read or deleted behind the cache's back."""
    apply, transport = applier(Reply(422, IMMUTABLE))
    with pytest.raises(Invalid):
        await apply.apply(PRIORITY_CLASSES, priority_class(200), None, policy=IMMUTABLE_VALUE)
    assert len(transport.seen) == 1


async def test_without_a_policy_for_the_field_the_rejection_is_raised() -> None:
    apply, transport = applier(Reply(422, IMMUTABLE))
    with pytest.raises(Invalid):
        await apply.apply(PRIORITY_CLASSES, priority_class(200), None)
    assert len(transport.seen) == 1


async def test_other_validation_errors_are_raised_not_recreated() -> None:
    apply, transport = applier(Reply(422, status_body(422, "Invalid", "data: too long")))
    with pytest.raises(Invalid):
        await apply.apply(CONFIG_MAPS, config_map({"a": "1"}), None)
    assert len(transport.seen) == 1


async def test_status_is_applied_through_the_subresource_only_when_it_differs() -> None:
    observed = config_map({})
    observed["status"] = {"phase": "Ready"}
    observed["metadata"]["managedFields"] = [
        {
            "manager": ME,
            "operation": "Apply",
            "subresource": "status",
            "fieldsV1": {"f:status": {"f:phase": {}}},
        }
    ]
    apply, transport = applier(Reply(200, observed))
    desired = copy.deepcopy(observed)
    assert (await apply.apply_status(CONFIG_MAPS, desired, observed)).outcome is ApplyOutcome.UNCHANGED
    desired["status"]["phase"] = "Failed"
    result = await apply.apply_status(CONFIG_MAPS, desired, observed)
    assert result.outcome is ApplyOutcome.UPDATED and result.reasons == [".status.phase"]
    method, url, _, body = transport.seen[0]
    assert method == "PATCH"
    assert url.split("?")[0].endswith("/configmaps/cm/status")
    assert orjson.loads(body or b"") == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns"},
        "status": {"phase": "Failed"},
    }
