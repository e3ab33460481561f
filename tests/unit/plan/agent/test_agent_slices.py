"""The host agent's EndpointSlice and its heartbeat: what it says in each phase, and that it is
written only when something but the heartbeat changed, or when the heartbeat is due."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmkube.plan.agent.slices import (
    HEARTBEAT_INTERVAL,
    SliceInputs,
    format_heartbeat,
    heartbeat_due_in,
    slice_intent,
    write_needed,
)
from llmkube.plan.agent.supervision import EndpointConditions
from llmkube.plan.apiserver.labels import label_map_errors
from llmkube.plan.inferenceservice.metal import metal_readiness

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
READY = EndpointConditions(ready=True, serving=True, terminating=False)
DRAINING = EndpointConditions(ready=False, serving=True, terminating=True)


def inputs(**changes: Any) -> SliceInputs:
    base: dict[str, Any] = {
        "namespace": "ai",
        "service": "llama-3-2",
        "service_uid": "svc-uid",
        "agent": "mac-studio",
        "version": "0.9.0",
        "address": "192.168.1.20",
        "port": 41234,
        "conditions": READY,
        "report": None,
    }
    return SliceInputs(**{**base, **changes})


def stored(intent: dict[str, Any]) -> dict[str, Any]:
    """As the API server returns it: its own metadata besides ours, other managers' labels."""
    copy: dict[str, Any] = {**intent, "metadata": {**intent["metadata"]}}
    copy["metadata"]["labels"] = {**intent["metadata"]["labels"], "someone.else/label": "x"}
    copy["metadata"]["annotations"] = {**intent["metadata"]["annotations"], "kubectl.kubernetes.io/x": "y"}
    copy["metadata"] |= {"uid": "u", "resourceVersion": "7", "generation": 2}
    return copy


def test_a_serving_slice_points_the_service_at_the_agents_server() -> None:
    intent = slice_intent(inputs(), T0)
    meta = intent["metadata"]
    assert meta["name"] == "llama-3-2-mac-studio"
    assert meta["labels"] == {
        "kubernetes.io/service-name": "llama-3-2",
        "llmkube.ai/managed-by": "metal-agent",
        "llmkube.ai/agent": "mac-studio",
        "endpointslice.kubernetes.io/managed-by": "agent.llmkube.ai",
    }
    assert meta["annotations"] == {
        "llmkube.ai/agent-heartbeat": "2026-03-01T12:00:00Z",
        "llmkube.ai/agent-version": "0.9.0",
    }
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Service", "name": "llama-3-2", "uid": "svc-uid"}
    ]
    assert intent["addressType"] == "IPv4"
    assert intent["ports"] == [{"name": "http", "port": 41234, "protocol": "TCP"}]
    assert intent["endpoints"] == [
        {"addresses": ["192.168.1.20"], "conditions": {"ready": True, "serving": True, "terminating": False}}
    ]
    # The controller reads it back as one ready endpoint.
    readiness = metal_readiness([intent], "ai", "llama-3-2", T0 + timedelta(seconds=10))
    assert (readiness.ready, readiness.registered, readiness.reports) == (1, 1, ())


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"conditions": DRAINING},
        {"port": None, "conditions": None, "report": ("CrashLoopBackOff", "llama-server exited")},
        {"agent": "a" * 63, "service": "s" * 63, "address": "fd00::20"},
    ],
)
def test_every_label_and_annotation_is_one_the_api_server_accepts(changes: dict[str, Any]) -> None:
    meta = slice_intent(inputs(**changes), T0)["metadata"]
    assert label_map_errors("labels", meta["labels"], check_values=True) == []
    assert label_map_errors("annotations", meta["annotations"], check_values=False) == []


def test_a_draining_endpoint_is_terminating_and_not_ready() -> None:
    intent = slice_intent(inputs(conditions=DRAINING), T0)
    assert intent["endpoints"][0]["conditions"] == {"ready": False, "serving": True, "terminating": True}
    assert metal_readiness([intent], "ai", "llama-3-2", T0).ready == 0


def test_a_report_without_a_process_has_no_endpoint_and_the_controller_reads_it() -> None:
    report = ("InsufficientMemory", "it needs ~9.0 GiB, more than the agent's whole memory budget (8.0 GiB)")
    intent = slice_intent(inputs(port=None, conditions=None, report=report), T0)
    assert (intent["endpoints"], intent["ports"]) == ([], [])
    assert intent["metadata"]["annotations"]["llmkube.ai/agent-reason"] == "InsufficientMemory"
    readiness = metal_readiness([intent], "ai", "llama-3-2", T0)
    assert readiness.failure is not None and readiness.failure.text() == f"mac-studio: {report[1]}"


def test_ipv6_addresses() -> None:
    assert slice_intent(inputs(address="fd00::20"), T0)["addressType"] == "IPv6"


def test_messages_are_cut_to_what_the_controller_repeats() -> None:
    intent = slice_intent(inputs(report=("ModelFetchFailed", "x" * 5000)), T0)
    assert len(intent["metadata"]["annotations"]["llmkube.ai/agent-message"]) == 1024


def test_nothing_to_write_until_the_heartbeat_is_due() -> None:
    have = stored(slice_intent(inputs(), T0))
    for seconds in (0, 1, 29):
        now = T0 + timedelta(seconds=seconds)
        assert write_needed(slice_intent(inputs(), now), have, now, HEARTBEAT_INTERVAL) is None
        assert heartbeat_due_in(have, now, HEARTBEAT_INTERVAL) == 30 - seconds
    now = T0 + timedelta(seconds=30)
    assert write_needed(slice_intent(inputs(), now), have, now, HEARTBEAT_INTERVAL) == "heartbeat"
    assert heartbeat_due_in(have, now, HEARTBEAT_INTERVAL) == 0


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"port": 41235}, "ports"),
        ({"conditions": EndpointConditions(ready=False, serving=False, terminating=False)}, "endpoints"),
        ({"report": ("StartingServer", "loading")}, "report"),
        ({"version": "0.9.1"}, "report"),
        ({"service_uid": "new-uid"}, "owner"),
        ({"address": "192.168.1.21"}, "endpoints"),
    ],
)
def test_any_change_but_the_heartbeat_is_written_at_once(change: dict[str, Any], what: str) -> None:
    have = stored(slice_intent(inputs(), T0))
    now = T0 + timedelta(seconds=1)
    assert (
        write_needed(slice_intent(inputs(**change), now), have, now, HEARTBEAT_INTERVAL) == f"changed: {what}"
    )


def test_a_report_that_ends_is_a_change() -> None:
    have = stored(slice_intent(inputs(report=("StartingServer", "loading"), conditions=None, port=None), T0))
    now = T0 + timedelta(seconds=1)
    assert (
        write_needed(slice_intent(inputs(), now), have, now, HEARTBEAT_INTERVAL)
        == "changed: report, ports, endpoints"
    )


def test_a_missing_or_unreadable_heartbeat_is_due() -> None:
    have = stored(slice_intent(inputs(), T0))
    have["metadata"]["annotations"]["llmkube.ai/agent-heartbeat"] = "yesterday"
    assert write_needed(slice_intent(inputs(), T0), have, T0, HEARTBEAT_INTERVAL) == "heartbeat"
    assert write_needed(slice_intent(inputs(), T0), None, T0, HEARTBEAT_INTERVAL) == "create"
    assert heartbeat_due_in(None, T0, HEARTBEAT_INTERVAL) == 0


def test_heartbeats_are_rfc3339_utc_whole_seconds() -> None:
    assert format_heartbeat(datetime(2026, 3, 1, 13, 0, 5, 999_999, tzinfo=UTC)) == "2026-03-01T13:00:05Z"
