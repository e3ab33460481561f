"""The pure pieces of the controllers: how cache objects become facts and keys."""

from datetime import UTC, datetime
from typing import Any

import pytest

from llmkube.api.inferenceservice import InferenceService, InferenceServiceStatus
from llmkube.controllers.inferenceservice import (
    _phase_index,
    _priority_class_index,
    _service_name_index,
    queue_entry_of,
    queue_rank_changed,
    status_body,
)
from llmkube.controllers.model import gpu_capacity, node_capacity_changed
from llmkube.kube.errors import ApiError, FieldCause, Forbidden, NotFound
from llmkube.kube.store import Change
from llmkube.kube.types import ObjectKey
from llmkube.plan.model.decision import ActionKind, ModelAction
from llmkube.plan.model.facts import ModelFacts
from llmkube.plan.queue import QueueEntry


def node(name: str, capacity: dict[str, str], heartbeat: str = "t0") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"capacity": capacity, "conditions": [{"type": "Ready", "lastHeartbeatTime": heartbeat}]},
    }


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        ([], {}),
        ([node("a", {"cpu": "8", "memory": "1Gi"})], {}),
        ([node("a", {"nvidia.com/gpu": "2"}), node("b", {"nvidia.com/gpu": "1"})], {"nvidia.com/gpu": 3}),
        ([node("a", {"amd.com/gpu": "4", "nvidia.com/gpu": "1"})], {"amd.com/gpu": 4, "nvidia.com/gpu": 1}),
        ([node("a", {"example.com/weird": "1k"})], {}),  # not an integer count: ignored, never a crash
        ([{"metadata": {"name": "bare"}}], {}),
    ],
)
def test_gpu_capacity_sums_extended_resources(nodes: list[dict[str, Any]], expected: dict[str, int]) -> None:
    assert gpu_capacity(nodes) == expected


@pytest.mark.parametrize(
    ("change", "passes"),
    [
        (Change("ADDED", None, node("a", {"nvidia.com/gpu": "1"})), True),
        (Change("DELETED", node("a", {"nvidia.com/gpu": "1"}), None), True),
        # A heartbeat: only status timestamps moved.
        (
            Change(
                "MODIFIED", node("a", {"nvidia.com/gpu": "1"}, "t0"), node("a", {"nvidia.com/gpu": "1"}, "t1")
            ),
            False,
        ),
        (Change("MODIFIED", node("a", {"nvidia.com/gpu": "1"}), node("a", {"nvidia.com/gpu": "2"})), True),
        (Change("MODIFIED", node("a", {"cpu": "8"}), node("a", {"cpu": "16"})), False),
    ],
)
def test_only_gpu_capacity_changes_wake_models(change: Change, passes: bool) -> None:
    assert node_capacity_changed(change) is passes


def isvc(name: str, namespace: str = "ai", **fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-02T03:04:05Z"},
        "spec": {"modelRef": "m", **fields.get("spec", {})},
        "status": fields.get("status", {}),
    }


def test_queue_entry_reads_stored_priority_and_creation_time() -> None:
    entry = queue_entry_of(isvc("a", status={"effectivePriority": 100000, "phase": "WaitingForGPU"}))
    assert entry == QueueEntry("ai", "a", 100000, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    bare = queue_entry_of({"metadata": {"name": "b", "namespace": "ai", "creationTimestamp": "not a time"}})
    assert bare == QueueEntry("ai", "b", 0, None)


@pytest.mark.parametrize(
    ("name", "key"),
    [("llama", "ai/llama"), ("llama.3.1", "ai/llama-3-1")],
)
def test_service_name_index_maps_dotted_names_to_their_service(name: str, key: str) -> None:
    assert tuple(_service_name_index(isvc(name))) == (key,)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, ("llmkube-normal",)),
        ({"priority": "batch"}, ("llmkube-batch",)),
        ({"priorityClassName": "team-gold", "priority": "high"}, ("team-gold",)),
    ],
)
def test_priority_class_index(spec: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert tuple(_priority_class_index(isvc("a", spec=spec))) == expected


def test_priority_class_index_skips_objects_that_do_not_parse() -> None:
    assert tuple(_priority_class_index({"metadata": {"name": "x"}, "spec": {"replicas": "many"}})) == ()


def test_phase_index() -> None:
    assert tuple(_phase_index(isvc("a", status={"phase": "WaitingForGPU"}))) == ("WaitingForGPU",)
    assert tuple(_phase_index(isvc("a"))) == ()


def test_status_body_drops_unset_fields_and_keeps_the_identity() -> None:
    service = InferenceService.model_validate(isvc("a"))
    body = status_body(service, InferenceServiceStatus(phase="Pending", model_ready=False, queue_position=0))
    assert body == {
        "metadata": {"name": "a", "namespace": "ai"},
        "status": {"phase": "Pending", "modelReady": False, "queuePosition": 0},
    }


def waiting(priority: int = 10000) -> dict[str, Any]:
    return isvc("a", status={"phase": "WaitingForGPU", "effectivePriority": priority})


@pytest.mark.parametrize(
    ("change", "passes"),
    [
        (Change("ADDED", None, waiting()), True),
        (Change("ADDED", None, waiting(), initial=True), False),  # a restart re-plans everybody anyway
        (Change("ADDED", None, isvc("a", status={"phase": "Creating"})), False),
        (Change("MODIFIED", isvc("a", status={"phase": "Creating"}), waiting()), True),  # enters
        (Change("MODIFIED", waiting(), isvc("a", status={"phase": "Ready"})), True),  # leaves
        (Change("MODIFIED", waiting(10000), waiting(100000)), True),  # re-ranked while waiting
        (Change("MODIFIED", waiting(), waiting()), False),  # e.g. its own position changed
        (
            Change("MODIFIED", isvc("a", status={"phase": "Creating"}), isvc("a", status={"phase": "Ready"})),
            False,
        ),
        (Change("DELETED", waiting(), None), True),
        (Change("DELETED", isvc("a", status={"phase": "Ready"}), None), False),
    ],
)
def test_gpu_queue_moves_when_a_service_enters_leaves_or_is_re_ranked(change: Change, passes: bool) -> None:
    assert queue_rank_changed(change) is passes


def svc_ports(*ports: tuple[int, str | None]) -> dict[str, Any]:
    entries = [{"name": "http", "port": p, **({"protocol": proto} if proto else {})} for p, proto in ports]
    return {"spec": {"ports": entries}}


@pytest.mark.parametrize(
    ("observed", "stray"),
    [
        (svc_ports((8080, "TCP")), []),
        (svc_ports((8080, None)), []),  # protocol defaults to TCP
        (svc_ports((1234, "TCP")), [1234]),  # a hand edit replaced our port
        (svc_ports((8080, "TCP"), (9090, "TCP")), [9090]),
        (svc_ports((8080, "UDP")), [8080]),  # same number, other protocol: another key
        ({"spec": {}}, []),
    ],
)
def test_stray_service_ports(observed: dict[str, Any], stray: list[int]) -> None:
    from llmkube.controllers.inferenceservice import stray_service_ports

    desired = svc_ports((8080, "TCP"))
    assert [p["port"] for p in stray_service_ports(desired, observed)] == stray


CREATING = InferenceServiceStatus(phase="Creating", ready_replicas=0)
READY = InferenceServiceStatus(phase="Ready", ready_replicas=1)


@pytest.mark.parametrize(
    ("cached", "cached_version", "last_write", "new", "write"),
    [
        (READY, "5", None, READY, False),  # nothing changed
        (CREATING, "5", None, READY, True),  # a change, nothing written before
        (CREATING, "5", ("5", READY), READY, False),  # we wrote it; the cache has not caught up
        (CREATING, "5", ("5", READY), InferenceServiceStatus(phase="Failed"), True),  # a new change
        (CREATING, "6", ("5", READY), READY, True),  # the cache moved on (someone rewrote it): compare
        (None, None, None, CREATING, True),
    ],
)
def test_status_write_needed(
    cached: InferenceServiceStatus | None,
    cached_version: str | None,
    last_write: tuple[str | None, InferenceServiceStatus] | None,
    new: InferenceServiceStatus,
    write: bool,
) -> None:
    from llmkube.controllers.inferenceservice import status_write_needed

    assert status_write_needed(cached, cached_version, last_write, new) is write


@pytest.mark.parametrize(
    ("error", "terminating"),
    [
        (
            Forbidden(
                403,
                'deployments.apps "a" is forbidden: unable to create new content in namespace ai '
                "because it is being terminated",
                causes=(
                    FieldCause("metadata.namespace", "NamespaceTerminating", "namespace ai is terminating"),
                ),
            ),
            True,
        ),
        (Forbidden(403, "unable to create new content in namespace ai because it is being terminated"), True),
        (Forbidden(403, 'deployments.apps is forbidden: User "x" cannot create resource'), False),
        (NotFound(404, "namespaces ai not found"), False),
    ],
)
def test_namespace_terminating_is_told_apart_from_rbac(error: ApiError, terminating: bool) -> None:
    from llmkube.controllers.inferenceservice import namespace_terminating

    assert namespace_terminating(error) is terminating


@pytest.mark.parametrize(
    ("kind", "timed"),
    [
        (ActionKind.COPY_LOCAL, True),
        (ActionKind.REFETCH, True),
        (ActionKind.VERIFY, False),
        (ActionKind.PROBE_FINGERPRINT, False),
    ],
)
async def test_only_copies_are_timed(kind: ActionKind, timed: bool) -> None:
    from llmkube.controllers.model import TimedCopies

    performed: list[ActionKind] = []
    observed: list[float] = []

    class Recorder:
        async def perform(self, action: ModelAction, facts: ModelFacts) -> ModelFacts:
            performed.append(action.kind)
            return facts

    facts = ModelFacts()
    assert await TimedCopies(Recorder(), observed.append).perform(ModelAction(kind=kind), facts) is facts
    assert performed == [kind]
    assert len(observed) == (1 if timed else 0)
    assert all(seconds >= 0 for seconds in observed)


@pytest.mark.parametrize(
    ("change", "deletion"),
    [
        (Change("DELETED", {"metadata": {"name": "c"}}, None), True),
        (Change("ADDED", None, {"metadata": {"name": "c"}}), False),
        (Change("MODIFIED", {"metadata": {"name": "c"}}, {"metadata": {"name": "c"}}), False),
    ],
)
def test_only_claim_deletions_wake_services(change: Change, deletion: bool) -> None:
    from llmkube.controllers.inferenceservice import is_deletion

    assert is_deletion(change) is deletion


@pytest.mark.parametrize("fails", [False, True])
async def test_timed_reconcile_observes_every_call(fails: bool) -> None:
    from prometheus_client import CollectorRegistry

    from llmkube.controllers.metrics import LLMKubeMetrics
    from llmkube.kube.controller import Result

    registry = CollectorRegistry()
    metrics = LLMKubeMetrics(registry)

    async def reconcile(key: ObjectKey) -> Result | None:
        if fails:
            raise RuntimeError("boom")
        return Result(requeue_after=5)

    timed = metrics.timed("model", reconcile)
    if fails:
        with pytest.raises(RuntimeError):
            await timed(ObjectKey("ai", "m"))
    else:
        assert await timed(ObjectKey("ai", "m")) == Result(requeue_after=5)
    count = registry.get_sample_value("llmkube_reconcile_duration_seconds_count", {"controller": "model"})
    assert count == 1
