"""The state gauges are read from the caches at scrape time: exact series for what the cache holds,
nothing while no controller publishes (a standby), and a deleted object's series go with it. Phase
labels are spelled as status.phase, for both kinds."""

from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from llmkube.controllers.metrics import LLMKubeMetrics
from llmkube.kube.cache.store import Store, object_key
from llmkube.kube.exposition import exposition

PHASES = ("Pending", "Creating", "Progressing", "Ready", "WaitingForGPU", "Stopped", "Failed", "Suspended")
MODEL_PHASES = ("Pending", "Downloading", "Copying", "Ready", "Failed")


def obj(
    name: str, status: dict[str, Any] | None = None, namespace: str = "ai", spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec or {"modelRef": "hf"},
        **({"status": status} if status else {}),
    }


def model_series(name: str, phase: str, namespace: str = "ai") -> dict[tuple[tuple[str, str], ...], float]:
    return {
        (("model", name), ("namespace", namespace), ("phase", candidate)): float(candidate == phase)
        for candidate in MODEL_PHASES
    }


def series(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """One metric's series as a scrape of the registry's answer shows them (parsed back)."""
    found: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(exposition(registry).decode()):
        for sample in family.samples:
            if sample.name == name:
                labels = tuple(sorted(sample.labels.items()))
                assert labels not in found, f"{name}{labels} twice in one answer"
                found[labels] = sample.value
    return found


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
    models.upsert(obj("hf", {"phase": "Ready"}, spec={"source": "org/hf"}))
    models.upsert(obj("copied", {"phase": "Ready"}, spec={"source": "/data/m.gguf"}))
    models.upsert(obj("broken", {"phase": "Failed"}, spec={"source": "nope"}))
    models.upsert(obj("new", spec={"source": "org/new"}))

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
    # One spelling: the phase as status.phase says it (the reference wrote Ready, ready or Cached).
    assert series(registry, "llmkube_model_status") == {
        **model_series("hf", "Ready"),
        **model_series("copied", "Ready"),
        **model_series("broken", "Failed"),
    }

    # The cache changes: the next scrape shows it (a phase moves, a deleted object's series go).
    services.upsert(obj("ready", {"phase": "Progressing"}))
    services.delete(object_key(obj("waits")))
    models.delete(object_key(obj("broken")))
    assert series(registry, "llmkube_inferenceservice_phase") == phase_series("ready", "Progressing")
    assert series(registry, "llmkube_model_status") == {
        **model_series("hf", "Ready"),
        **model_series("copied", "Ready"),
    }

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


def test_per_service_gauges_say_what_runs_and_how_many() -> None:
    """llmkube_inferenceservice_info, _replicas and _gpus_per_replica, from the services and their
    Models in the caches (the GPU count as the planner resolves it: the Model's first)."""
    registry = CollectorRegistry()
    metrics = LLMKubeMetrics(registry)
    services, models = Store(), Store()
    models.upsert(
        obj(
            "cuda",
            {"phase": "Ready"},
            spec={"source": "org/m", "hardware": {"accelerator": "cuda", "gpu": {"count": 2}}},
        )
    )
    services.upsert(
        obj(
            "chat",
            {"phase": "Progressing", "desiredReplicas": 3, "readyReplicas": 1, "replicas": 2},
            spec={"modelRef": "cuda", "runtime": "vllm", "replicas": 3, "resources": {"gpu": 1}},
        )
    )
    services.upsert(obj("orphan", spec={"modelRef": "absent", "resources": {"gpu": 1}}))  # no status yet
    metrics.state.publish_services(services, list, models)
    assert series(registry, "llmkube_inferenceservice_info") == {
        (
            ("accelerator", "cuda"),
            ("inferenceservice", "chat"),
            ("model", "cuda"),
            ("namespace", "ai"),
            ("runtime", "vllm"),
        ): 1.0,
        (
            ("accelerator", ""),
            ("inferenceservice", "orphan"),
            ("model", "absent"),
            ("namespace", "ai"),
            ("runtime", "llamacpp"),
        ): 1.0,
    }
    assert series(registry, "llmkube_inferenceservice_replicas") == {
        (("inferenceservice", "chat"), ("namespace", "ai"), ("state", "desired")): 3.0,
        (("inferenceservice", "chat"), ("namespace", "ai"), ("state", "ready")): 1.0,
        (("inferenceservice", "chat"), ("namespace", "ai"), ("state", "running")): 2.0,
    }
    assert series(registry, "llmkube_inferenceservice_gpus_per_replica") == {
        (("inferenceservice", "chat"), ("namespace", "ai")): 2.0,  # the Model's count wins
        (("inferenceservice", "orphan"), ("namespace", "ai")): 1.0,  # no Model: the service's
    }
    # A change in the cache is the next scrape's answer: scaled down, then deleted.
    services.upsert(
        obj(
            "chat",
            {"phase": "Ready", "desiredReplicas": 1, "readyReplicas": 1, "replicas": 1},
            spec={"modelRef": "cuda", "runtime": "vllm", "replicas": 1},
        )
    )
    replicas = series(registry, "llmkube_inferenceservice_replicas")
    assert {labels[2][1]: value for labels, value in replicas.items()} == {
        "desired": 1.0,
        "ready": 1.0,
        "running": 1.0,
    }
    services.delete(object_key(obj("chat")))
    assert all(
        ("inferenceservice", "chat") not in labels
        for labels in series(registry, "llmkube_inferenceservice_info")
    )
    assert series(registry, "llmkube_inferenceservice_replicas") == {}


def test_a_models_change_is_the_next_scrapes_answer_for_its_unchanged_services() -> None:
    """Rows are kept per version of the service and of its Model: a Model edited (or created
    after its service) is seen without the service changing."""
    registry = CollectorRegistry()
    metrics = LLMKubeMetrics(registry)
    services, models = Store(compact=True), Store(compact=True)
    services.upsert(obj("chat", {"phase": "Ready"}, spec={"modelRef": "m", "resources": {"gpu": 1}}))
    metrics.state.publish_services(services, list, models)
    labels = (("inferenceservice", "chat"), ("namespace", "ai"))
    assert series(registry, "llmkube_inferenceservice_gpus_per_replica") == {labels: 1.0}
    models.upsert(obj("m", {"phase": "Ready"}, spec={"source": "org/m", "hardware": {"gpu": {"count": 4}}}))
    assert series(registry, "llmkube_inferenceservice_gpus_per_replica") == {labels: 4.0}
    models.upsert(
        obj(
            "m",
            {"phase": "Ready"},
            spec={"source": "org/m", "hardware": {"accelerator": "cuda", "gpu": {"count": 2}}},
        )
    )
    assert series(registry, "llmkube_inferenceservice_gpus_per_replica") == {labels: 2.0}
    ((info, _),) = series(registry, "llmkube_inferenceservice_info").items()
    assert dict(info)["accelerator"] == "cuda"
    models.delete("ai/m")
    assert series(registry, "llmkube_inferenceservice_gpus_per_replica") == {labels: 1.0}


def test_each_version_of_an_object_is_parsed_once_across_scrapes(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = CollectorRegistry()
    metrics = LLMKubeMetrics(registry)
    services, models = Store(compact=True), Store(compact=True)
    for name in ("a", "b", "c"):
        services.upsert(obj(name, {"phase": "Ready"}))
        models.upsert(obj(name, {"phase": "Ready"}, spec={"source": f"org/{name}"}))
    metrics.state.publish_services(services, list, models)
    metrics.state.publish_models(models)
    decoded: list[str] = []
    real_decode = Store.decode

    def counting_decode(token: object) -> dict[str, Any]:
        found = real_decode(token)
        decoded.append(found["metadata"]["name"])
        return found

    monkeypatch.setattr(Store, "decode", staticmethod(counting_decode))
    exposition(registry)
    assert sorted(decoded) == ["a", "a", "b", "b", "c", "c"]  # each service and each Model
    decoded.clear()
    exposition(registry)
    assert decoded == []
    services.upsert(obj("b", {"phase": "Failed"}))
    answer = series(registry, "llmkube_inferenceservice_phase")
    assert decoded == ["b"]
    assert answer[(("inferenceservice", "b"), ("namespace", "ai"), ("phase", "Failed"))] == 1.0
