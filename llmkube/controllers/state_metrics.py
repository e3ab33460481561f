"""Gauges that describe the present, computed from the informer caches at scrape time.

Per InferenceService: its phase, what it runs (model, runtime, accelerator), its replicas and the
GPUs each replica asks for; the GPU queue's depth; per Model: its phase. Setting them when a
status is written leaves them empty after every restart or failover (a converged object makes no
write), so instead a collector reads the caches whenever Prometheus scrapes: right as soon as the
caches are synced, with zero writes, and the series of a deleted object vanish with it.

Phase labels are spelled exactly as `status.phase` (one series per phase, 1 for the current one).

The controllers publish their caches only while they run (the leader): a standby's caches are
warm too, but reporting them would count every object once per replica.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import get_args

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import ValidationError

from llmkube.api.inferenceservice import InferenceService, Phase
from llmkube.api.model import Model, ModelPhase
from llmkube.kube.store import Store
from llmkube.kube.types import Obj
from llmkube.plan.service_info import ServiceInfo, service_info

__all__ = ["ISVC_PHASES", "MODEL_PHASES", "StateMetrics"]

ISVC_PHASES: tuple[str, ...] = get_args(Phase)
MODEL_PHASES: tuple[str, ...] = get_args(ModelPhase)

PHASE = "llmkube_inferenceservice_phase"
INFO = "llmkube_inferenceservice_info"
REPLICAS = "llmkube_inferenceservice_replicas"
GPUS = "llmkube_inferenceservice_gpus_per_replica"
QUEUE_DEPTH = "llmkube_gpu_queue_depth"
MODEL_STATUS = "llmkube_model_status"
_SERVICE = ["inferenceservice", "namespace"]
_HELP = {
    PHASE: "1 for the InferenceService's current status.phase, 0 for the other phases.",
    INFO: "Always 1: what the InferenceService runs (model, runtime, the Model's accelerator).",
    REPLICAS: "The InferenceService's replicas from its status: desired, ready, running (pods).",
    GPUS: "GPUs each replica of the InferenceService requests (the Model's count first, then the service's).",
    QUEUE_DEPTH: "Number of InferenceServices waiting for GPUs.",
    MODEL_STATUS: "1 for the Model's current status.phase, 0 for the other phases.",
}
_LABELS = {
    PHASE: [*_SERVICE, "phase"],
    INFO: [*_SERVICE, "model", "runtime", "accelerator"],
    REPLICAS: [*_SERVICE, "state"],
    GPUS: _SERVICE,
    QUEUE_DEPTH: [],
    MODEL_STATUS: ["model", "namespace", "phase"],
}

#: the identities (namespace, name) of the services waiting for GPUs, in any order
WaitingServices = Callable[[], Iterable[tuple[str, str]]]


def _family(name: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, _HELP[name], labels=_LABELS[name])


def _phase(obj: Obj) -> str | None:
    status = obj.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    return phase if isinstance(phase, str) and phase else None


def _identity(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


@dataclass(frozen=True)
class _Services:
    store: Store
    waiting: WaitingServices
    models: Store | None


def _model(models: Store | None, namespace: str, name: str) -> Model | None:
    raw = models.get_object(namespace, name) if models is not None else None
    if raw is None:
        return None
    try:
        return Model.model_validate(raw)
    except ValidationError:
        return None


class StateMetrics(Collector):
    def __init__(self) -> None:
        self._services: list[_Services] = []
        self._models: list[Store] = []

    def publish_services(
        self, store: Store, waiting: WaitingServices, models: Store | None = None
    ) -> Callable[[], None]:
        """Report the InferenceServices of `store` (their Models from `models`); returns the
        function that stops it."""
        source = _Services(store, waiting, models)
        self._services.append(source)
        return lambda: self._services.remove(source)

    def publish_models(self, store: Store) -> Callable[[], None]:
        self._models.append(store)
        return lambda: self._models.remove(store)

    def describe(self) -> Iterator[Metric]:
        # The names, for the registry's duplicate check; the samples exist only at scrape time.
        for name in _HELP:
            yield _family(name)

    def collect(self) -> Iterator[Metric]:
        if self._services:
            yield from self._service_families()
            yield self._queue_depth()
        if self._models:
            yield self._model_status()

    def _service_families(self) -> Iterator[Metric]:
        phases, info, replicas, gpus = _family(PHASE), _family(INFO), _family(REPLICAS), _family(GPUS)
        seen: set[tuple[str, str]] = set()
        for source in self._services:
            for obj in source.store.objects():
                identity = _identity(obj)
                if identity in seen:
                    continue
                seen.add(identity)
                namespace, name = identity
                phase = _phase(obj)
                if phase is not None:  # no status written yet: no phase to report
                    for candidate in ISVC_PHASES:
                        phases.add_metric([name, namespace, candidate], 1.0 if candidate == phase else 0.0)
                described = self._describe(obj, source.models, namespace)
                if described is None:
                    continue
                info.add_metric(
                    [name, namespace, described.model, described.runtime, described.accelerator], 1.0
                )
                gpus.add_metric([name, namespace], float(described.gpus_per_replica))
                for state, count in described.replicas.items():
                    replicas.add_metric([name, namespace, state], float(count))
        yield from (phases, info, replicas, gpus)

    @staticmethod
    def _describe(obj: Obj, models: Store | None, namespace: str) -> ServiceInfo | None:
        try:
            isvc = InferenceService.model_validate(obj)
        except ValidationError:
            return None  # only a schema skew gets here; the controller reports it in its logs
        return service_info(isvc, _model(models, namespace, isvc.spec.model_ref))

    def _queue_depth(self) -> Metric:
        waiting: set[tuple[str, str]] = set()
        for source in self._services:
            waiting.update(source.waiting())
        family = _family(QUEUE_DEPTH)
        family.add_metric([], float(len(waiting)))
        return family

    def _model_status(self) -> Metric:
        family = _family(MODEL_STATUS)
        seen: set[tuple[str, str]] = set()
        for store in self._models:
            for obj in store.objects():
                identity = _identity(obj)
                phase = _phase(obj)
                if identity in seen or phase is None:
                    continue
                seen.add(identity)
                namespace, name = identity
                for candidate in MODEL_PHASES:
                    family.add_metric([name, namespace, candidate], 1.0 if candidate == phase else 0.0)
        return family
