"""The controller's /metrics answer, with the per-object families rendered next to the registry's,
passes `promtool check metrics` (the text format as Prometheus reads it, and its lint)."""

import subprocess
from typing import Any

from prometheus_client import CollectorRegistry
from tools import tool

from llmkube.controllers.metrics import LLMKubeMetrics
from llmkube.kube.cache import Store
from llmkube.kube.exposition import exposition


def obj(name: str, status: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ai", "resourceVersion": "1"},
        "spec": spec,
        "status": status,
    }


def test_the_answer_passes_promtool_check_metrics() -> None:
    registry = CollectorRegistry()
    metrics = LLMKubeMetrics(registry)
    metrics.reconcile_total.labels("inferenceservice", "success").inc()
    services, models = Store(compact=True), Store(compact=True)
    models.upsert(obj("m", {"phase": "Ready"}, {"source": "org/m", "hardware": {"accelerator": "cuda"}}))
    services.upsert(
        obj(
            "chat",
            {"phase": "Progressing", "desiredReplicas": 2, "readyReplicas": 1, "replicas": 2},
            {"modelRef": "m", "replicas": 2},
        )
    )
    services.upsert(obj("idle", {"phase": "Stopped"}, {"modelRef": "absent", "replicas": 0}))
    metrics.state.publish_services(services, list, models)
    metrics.state.publish_models(models)
    answer = exposition(registry)
    result = subprocess.run(
        [str(tool("promtool")), "check", "metrics"], input=answer, capture_output=True, timeout=60
    )
    assert result.returncode == 0, (result.stdout + result.stderr).decode()
    for name in ("llmkube_inferenceservice_phase", "llmkube_inferenceservice_info", "llmkube_model_status"):
        assert answer.count(f"# TYPE {name} gauge".encode()) == 1


def test_the_openmetrics_answer_parses_strictly() -> None:
    """The same families, asked for as OpenMetrics, read by prometheus_client's strict parser."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from llmkube.kube.exposition import negotiate

    registry = CollectorRegistry()
    metrics = LLMKubeMetrics(registry)
    metrics.reconcile_total.labels("inferenceservice", "success").inc()
    services, models = Store(compact=True), Store(compact=True)
    models.upsert(obj("m", {"phase": "Ready"}, {"source": "org/m", "hardware": {"accelerator": "cuda"}}))
    services.upsert(obj("chat", {"phase": "Ready", "desiredReplicas": 1}, {"modelRef": "m"}))
    metrics.state.publish_services(services, list, models)
    metrics.state.publish_models(models)
    answer = exposition(registry, negotiate("application/openmetrics-text")).decode()
    names = {family.name for family in text_string_to_metric_families(answer)}
    assert {"llmkube_reconcile", "llmkube_inferenceservice_phase", "llmkube_model_status"} <= names
