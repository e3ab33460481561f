"""The pure pieces of the Model controller: how cache objects become facts and keys, and what is timed."""

from typing import Any

import pytest

from llmkube.controllers.model import gpu_capacity, node_capacity_changed
from llmkube.kube.cache import Change
from llmkube.kube.types import ObjectKey
from llmkube.plan.model.decision import ActionKind, ModelAction
from llmkube.plan.model.facts import ModelFacts


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


@pytest.mark.parametrize("fails", [False, True])
async def test_timed_reconcile_observes_and_counts_every_call(fails: bool) -> None:
    from prometheus_client import CollectorRegistry

    from llmkube.controllers.metrics import LLMKubeMetrics
    from llmkube.kube.control.controller import Result

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
    # ... and counts it by its result, whatever the reconcile was about (the reference counted only
    # some outcomes; controller_runtime_reconcile_total is the sibling it agrees with).
    result = "error" if fails else "success"
    assert (
        registry.get_sample_value("llmkube_reconcile_total", {"controller": "model", "result": result}) == 1
    )
    other = "success" if fails else "error"
    assert registry.get_sample_value("llmkube_reconcile_total", {"controller": "model", "result": other}) == 0


async def test_a_cancelled_reconcile_is_not_counted() -> None:
    """A shutdown or a lost lease cancels reconciles in flight: they did not finish."""
    import asyncio

    from prometheus_client import CollectorRegistry

    from llmkube.controllers.metrics import LLMKubeMetrics
    from llmkube.kube.control.controller import Result

    registry = CollectorRegistry()
    metrics = LLMKubeMetrics(registry)
    started = asyncio.Event()

    async def reconcile(key: ObjectKey) -> Result | None:
        started.set()
        await asyncio.Event().wait()
        return None

    task = asyncio.ensure_future(metrics.timed("model", reconcile)(ObjectKey("ai", "m")))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for result in ("success", "error"):
        assert (
            registry.get_sample_value("llmkube_reconcile_total", {"controller": "model", "result": result})
            == 0
        )


def test_the_node_cache_keeps_the_pod_networks() -> None:
    """The egress policy refuses the Nodes' Pod networks: the Node cache keeps spec.podCIDRs, and
    nothing else of the spec (taints, providerID, ...)."""
    from llmkube.controllers.resources import NODE_CACHE_TRANSFORM

    full = {
        "metadata": {"name": "n", "uid": "u", "resourceVersion": "1", "annotations": {"a": "b"}},
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd10:1::/64"], "taints": [{}]},
        "status": {"capacity": {"cpu": "8"}, "images": [{"names": ["x"]}]},
    }
    assert NODE_CACHE_TRANSFORM(full) == {
        "metadata": {"name": "n", "uid": "u", "resourceVersion": "1"},
        "spec": {"podCIDRs": ["10.244.1.0/24", "fd10:1::/64"]},
        "status": {"capacity": {"cpu": "8"}},
    }
