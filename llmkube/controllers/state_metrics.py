"""Gauges that describe the present, computed from the informer caches at scrape time.

`llmkube_inferenceservice_phase`, `llmkube_gpu_queue_depth` and `llmkube_model_status` say what
the objects are now. Setting them when a status is written leaves them empty after every restart
or failover (a converged object makes no write), so instead a collector reads the caches whenever
Prometheus scrapes: right as soon as the caches are synced, with zero writes, and the series of a
deleted object vanish with it.

The controllers publish their caches only while they run (the leader): a standby's caches are
warm too, but reporting them would count every object once per replica.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from llmkube.kube.store import Store
from llmkube.kube.types import Obj
from llmkube.plan.model.status import status_metric_label

__all__ = ["ISVC_PHASES", "StateMetrics"]

ISVC_PHASES = ("Pending", "Creating", "Progressing", "Ready", "WaitingForGPU", "Stopped", "Failed")

PHASE = "llmkube_inferenceservice_phase"
QUEUE_DEPTH = "llmkube_gpu_queue_depth"
MODEL_STATUS = "llmkube_model_status"
_HELP = {
    PHASE: "1 for the InferenceService's current phase, 0 for the others.",
    QUEUE_DEPTH: "Number of InferenceServices waiting for GPUs.",
    MODEL_STATUS: "1 for the Model's current status phase (Cached, Ready, ready, Failed).",
}
_LABELS = {
    PHASE: ["inferenceservice", "namespace", "phase"],
    QUEUE_DEPTH: [],
    MODEL_STATUS: ["model", "namespace", "phase"],
}

#: the identities (namespace, name) of the services waiting for GPUs, in any order
WaitingServices = Callable[[], Iterable[tuple[str, str]]]


def _status(obj: Obj) -> Obj:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _identity(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def _available_reason(status: Obj) -> str | None:
    for condition in status.get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Available":
            reason = condition.get("reason")
            return reason if isinstance(reason, str) else None
    return None


class StateMetrics(Collector):
    def __init__(self) -> None:
        self._services: list[tuple[Store, WaitingServices]] = []
        self._models: list[Store] = []

    def publish_services(self, store: Store, waiting: WaitingServices) -> Callable[[], None]:
        """Report the InferenceServices of `store`; returns the function that stops it."""
        source = (store, waiting)
        self._services.append(source)
        return lambda: self._services.remove(source)

    def publish_models(self, store: Store) -> Callable[[], None]:
        self._models.append(store)
        return lambda: self._models.remove(store)

    def describe(self) -> Iterator[Metric]:
        # The names, for the registry's duplicate check; the samples exist only at scrape time.
        for name in (PHASE, QUEUE_DEPTH, MODEL_STATUS):
            yield GaugeMetricFamily(name, _HELP[name], labels=_LABELS[name])

    def collect(self) -> Iterator[Metric]:
        if self._services:
            yield self._phases()
            yield self._queue_depth()
        if self._models:
            yield self._model_status()

    def _phases(self) -> Metric:
        family = GaugeMetricFamily(PHASE, _HELP[PHASE], labels=_LABELS[PHASE])
        seen: set[tuple[str, str]] = set()
        for store, _ in self._services:
            for obj in store.objects():
                identity = _identity(obj)
                phase = _status(obj).get("phase")
                if identity in seen or not isinstance(phase, str) or not phase:
                    continue  # no status written yet: no phase to report
                seen.add(identity)
                namespace, name = identity
                for candidate in ISVC_PHASES:
                    family.add_metric([name, namespace, candidate], 1.0 if candidate == phase else 0.0)
        return family

    def _queue_depth(self) -> Metric:
        waiting: set[tuple[str, str]] = set()
        for _, waiting_services in self._services:
            waiting.update(waiting_services())
        family = GaugeMetricFamily(QUEUE_DEPTH, _HELP[QUEUE_DEPTH], labels=[])
        family.add_metric([], float(len(waiting)))
        return family

    def _model_status(self) -> Metric:
        family = GaugeMetricFamily(MODEL_STATUS, _HELP[MODEL_STATUS], labels=_LABELS[MODEL_STATUS])
        seen: set[tuple[str, str]] = set()
        for store in self._models:
            for obj in store.objects():
                identity = _identity(obj)
                status = _status(obj)
                phase = status.get("phase")
                label = status_metric_label(
                    phase if isinstance(phase, str) else None, _available_reason(status)
                )
                if identity in seen or label is None:
                    continue
                seen.add(identity)
                namespace, name = identity
                family.add_metric([name, namespace, label], 1.0)
        return family
