"""The state gauges are read from the caches at scrape time: exact series for what the cache holds,
nothing while no controller publishes (a standby), and a deleted object's series go with it."""

from typing import Any

from prometheus_client import CollectorRegistry

from llmkube.controllers.metrics import LLMKubeMetrics
from llmkube.kube.store import Store, object_key

PHASES = ("Pending", "Creating", "Progressing", "Ready", "WaitingForGPU", "Stopped", "Failed")


def obj(name: str, status: dict[str, Any] | None = None, namespace: str = "ai") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, **({"status": status} if status else {})}


def series(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name == name
    }


def phase_series(name: str, phase: str, namespace: str = "ai") -> dict[tuple[tuple[str, str], ...], float]:
    return {
        (("inferenceservice", name), ("namespace", namespace), ("phase", candidate)): float(
            candidate == phase
        )
        for candidate in PHASES
    }


def test_gauges_follow_the_cache_and_exist_only_while_published() -> None:
    registry = CollectorRegistry()
    metrics = LLMKubeMetrics(registry)
    services, models = Store(), Store()
    services.upsert(obj("ready", {"phase": "Ready"}))
    services.upsert(obj("waits", {"phase": "WaitingForGPU"}))
    services.upsert(obj("new"))  # no status written yet: no series
    models.upsert(
        obj("hf", {"phase": "Ready", "conditions": [{"type": "Available", "reason": "RuntimeResolved"}]})
    )
    models.upsert(
        obj("copied", {"phase": "Ready", "conditions": [{"type": "Available", "reason": "ModelReady"}]})
    )
    models.upsert(obj("broken", {"phase": "Failed"}))
    models.upsert(obj("new"))

    # A standby (or a controller not started yet) reports nothing.
    assert series(registry, "llmkube_inferenceservice_phase") == {}
    assert series(registry, "llmkube_gpu_queue_depth") == {}
    assert series(registry, "llmkube_model_status") == {}

    withdraw_services = metrics.state.publish_services(services, lambda: [("ai", "waits")])
    withdraw_models = metrics.state.publish_models(models)
    assert series(registry, "llmkube_inferenceservice_phase") == {
        **phase_series("ready", "Ready"),
        **phase_series("waits", "WaitingForGPU"),
    }
    assert series(registry, "llmkube_gpu_queue_depth") == {(): 1.0}
    assert series(registry, "llmkube_model_status") == {
        (("model", "hf"), ("namespace", "ai"), ("phase", "ready")): 1.0,
        (("model", "copied"), ("namespace", "ai"), ("phase", "Ready")): 1.0,
        (("model", "broken"), ("namespace", "ai"), ("phase", "Failed")): 1.0,
    }

    # The cache changes: the next scrape shows it (a phase moves, a deleted object's series go).
    services.upsert(obj("ready", {"phase": "Progressing"}))
    services.delete(object_key(obj("waits")))
    models.delete(object_key(obj("broken")))
    assert series(registry, "llmkube_inferenceservice_phase") == phase_series("ready", "Progressing")
    assert (("model", "broken"), ("namespace", "ai"), ("phase", "Failed")) not in series(
        registry, "llmkube_model_status"
    )

    withdraw_services()
    withdraw_models()
    assert series(registry, "llmkube_inferenceservice_phase") == {}
    assert series(registry, "llmkube_model_status") == {}


def test_two_caches_of_the_same_objects_count_each_object_once() -> None:
    registry = CollectorRegistry()
    metrics = LLMKubeMetrics(registry)
    whole, scoped = Store(), Store()
    for store in (whole, scoped):
        store.upsert(obj("a", {"phase": "WaitingForGPU"}))
    whole.upsert(obj("b", {"phase": "WaitingForGPU"}, namespace="other"))
    metrics.state.publish_services(whole, lambda: [("ai", "a"), ("other", "b")])
    metrics.state.publish_services(scoped, lambda: [("ai", "a")])
    assert series(registry, "llmkube_gpu_queue_depth") == {(): 2.0}
    assert series(registry, "llmkube_inferenceservice_phase") == {
        **phase_series("a", "WaitingForGPU"),
        **phase_series("b", "WaitingForGPU", namespace="other"),
    }
