"""Gauges that describe the present, computed from the informer caches at scrape time.

Per InferenceService: its phase, what it runs (model, runtime, accelerator), its replicas and the
GPUs each replica asks for; the GPU queue's depth; per Model: its phase. Setting them when a
status is written leaves them empty after every restart or failover (a converged object makes no
write), so instead a collector reads the caches whenever Prometheus scrapes: right as soon as the
caches are synced, with zero writes, and the series of a deleted object vanish with it.

Phase labels are spelled exactly as `status.phase` (one series per phase, 1 for the current one).

At 10,000 services these are 170,000 series. Through prometheus_client's Collector path a scrape
re-parsed and re-validated every cached object and built a Sample per series: 2.9 s of CPU and
81 MiB allocated per scrape (`bench/bench_state_metrics.py`). So the per-object families are
rendered straight to the text format (`kube/exposition.py`), from rows derived once per version of
each object: a row is kept with the store's token of the object (and of its Model) and derived
again only when a token changes. The queue depth, one series, stays a Collector.

The controllers publish their caches only while they run (the leader): a standby's caches are
warm too, but reporting them would count every object once per replica.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, TypeVar, get_args

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import ValidationError

from llmkube.api.enums import ModelPhase, Phase
from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.kube.cache import Store
from llmkube.kube.exposition import escape_label_value, family_header
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.service_info import REPLICA_STATES, ServiceInfo, service_info

__all__ = ["ISVC_PHASES", "MODEL_PHASES", "StateMetrics"]

ISVC_PHASES: tuple[str, ...] = get_args(Phase)
MODEL_PHASES: tuple[str, ...] = get_args(ModelPhase)

PHASE = "llmkube_inferenceservice_phase"
INFO = "llmkube_inferenceservice_info"
REPLICAS = "llmkube_inferenceservice_replicas"
GPUS = "llmkube_inferenceservice_gpus_per_replica"
QUEUE_DEPTH = "llmkube_gpu_queue_depth"
MODEL_STATUS = "llmkube_model_status"
_HELP = {
    PHASE: "1 for the InferenceService's current status.phase, 0 for the other phases.",
    INFO: "Always 1: what the InferenceService runs (model, runtime, the Model's accelerator).",
    REPLICAS: "The InferenceService's replicas from its status: desired, ready, running (pods).",
    GPUS: "GPUs each replica of the InferenceService requests (the Model's count first, then the service's).",
    QUEUE_DEPTH: "Number of InferenceServices waiting for GPUs.",
    MODEL_STATUS: "1 for the Model's current status.phase, 0 for the other phases.",
}

#: the identities (namespace, name) of the services waiting for GPUs, in any order
WaitingServices = Callable[[], Iterable[tuple[str, str]]]


def _family(name: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, _HELP[name], labels=[])


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


class _ServiceRow(NamedTuple):
    """What one InferenceService's series say, label values escaped."""

    name: str
    namespace: str
    #: None before the first status (no phase series)
    phase: str | None
    #: (model, runtime, accelerator); None when the object does not parse (a schema skew)
    info: tuple[str, str, str] | None
    gpus: float
    #: counts in REPLICA_STATES' order; empty before the first status
    replicas: tuple[float, ...]
    #: the store key of its Model (namespace/modelRef): a row is kept while that object is unchanged
    model_key: str


class _ModelRow(NamedTuple):
    name: str
    namespace: str
    phase: str


def _model(models: Store | None, namespace: str, name: str) -> Model | None:
    raw = models.get_object(namespace, name) if models is not None else None
    if raw is None:
        return None
    try:
        return Model.model_validate(raw)
    except ValidationError:
        return None


def _shared(value: str) -> str:
    """Escaped, and one object for every row that has it (namespaces, runtimes, accelerators and
    phases repeat across thousands of rows; each parsed object brings its own copy)."""
    return sys.intern(escape_label_value(value))


def _shared_or_none(value: str | None) -> str | None:
    return None if value is None else sys.intern(value)


def _service_row(obj: Obj, models: Store | None) -> _ServiceRow:
    namespace, name = _identity(obj)
    spec = obj.get("spec")
    model_ref = spec.get("modelRef") if isinstance(spec, dict) else None
    row = _ServiceRow(
        escape_label_value(name),
        _shared(namespace),
        _shared_or_none(_phase(obj)),
        None,
        0.0,
        (),
        f"{namespace}/{model_ref}" if isinstance(model_ref, str) else "",
    )
    try:
        isvc = InferenceService.model_validate(obj)
    except ValidationError:
        return row  # only a schema skew gets here; the controller reports it in its logs
    described: ServiceInfo = service_info(isvc, _model(models, namespace, isvc.spec.model_ref))
    return row._replace(
        info=(
            escape_label_value(described.model),
            _shared(described.runtime),
            _shared(described.accelerator),
        ),
        gpus=float(described.gpus_per_replica),
        replicas=tuple(
            float(described.replicas[state]) for state in REPLICA_STATES if state in described.replicas
        ),
    )


def _model_row(obj: Obj) -> _ModelRow | None:
    phase = _phase(obj)
    if phase is None:
        return None
    namespace, name = _identity(obj)
    return _ModelRow(escape_label_value(name), _shared(namespace), sys.intern(phase))


class StateMetrics(Collector):
    def __init__(self) -> None:
        self._services: list[_Services] = []
        self._models: list[Store] = []
        # store key -> (the object's token, its Model's token, its row): rows of unchanged objects
        self._service_rows: dict[str, tuple[object, object | None, _ServiceRow]] = {}
        self._model_rows: dict[str, tuple[object, _ModelRow | None]] = {}

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

    # -- the queue depth: a Collector ----------------------------------------------------------

    def describe(self) -> Iterator[Metric]:
        yield _family(QUEUE_DEPTH)

    def collect(self) -> Iterator[Metric]:
        if self._services:
            yield self._queue_depth()

    def _queue_depth(self) -> Metric:
        waiting: set[tuple[str, str]] = set()
        for source in self._services:
            waiting.update(source.waiting())
        family = _family(QUEUE_DEPTH)
        family.add_metric([], float(len(waiting)))
        return family

    # -- the per-object families: rendered (kube/exposition.py) --------------------------------

    def render(self) -> Iterator[str]:
        """The per-service and per-Model families in the text format (nothing while unpublished)."""
        if self._services:
            yield from self._render_services(self._current_service_rows())
        else:
            self._service_rows = {}  # a standby keeps no rows
        if self._models:
            yield from self._render_models(self._current_model_rows())
        else:
            self._model_rows = {}

    def _current_service_rows(self) -> list[_ServiceRow]:
        kept = self._service_rows
        fresh: dict[str, tuple[object, object | None, _ServiceRow]] = {}
        for source in self._services:
            models = source.models
            for key, token in source.store.tokens():
                if key in fresh:
                    continue  # two caches of the same objects: each object once
                known = kept.get(key)
                if known is not None and known[0] is token:
                    model_token = models.token(known[2].model_key) if models is not None else None
                    if known[1] is model_token:
                        fresh[key] = known
                        continue
                row = _service_row(source.store.decode(token), models)
                model_token = models.token(row.model_key) if models is not None else None
                fresh[key] = (token, model_token, row)
        self._service_rows = fresh  # deleted objects' rows go
        return [row for _, _, row in fresh.values()]

    def _current_model_rows(self) -> list[_ModelRow]:
        kept = self._model_rows
        fresh: dict[str, tuple[object, _ModelRow | None]] = {}
        for store in self._models:
            for key, token in store.tokens():
                if key in fresh:
                    continue
                known = kept.get(key)
                fresh[key] = (
                    known
                    if known is not None and known[0] is token
                    else (token, _model_row(store.decode(token)))
                )
        self._model_rows = fresh
        return [row for _, row in fresh.values() if row is not None]

    @staticmethod
    def _render_services(rows: list[_ServiceRow]) -> Iterator[str]:
        described = [row for row in rows if row.info is not None]
        yield family_header(PHASE, _HELP[PHASE])
        yield from _in_pieces(_phase_lines, [row for row in rows if row.phase is not None])
        yield family_header(INFO, _HELP[INFO])
        yield from _in_pieces(_info_lines, described)
        yield family_header(REPLICAS, _HELP[REPLICAS])
        yield from _in_pieces(_replica_lines, described)
        yield family_header(GPUS, _HELP[GPUS])
        yield from _in_pieces(_gpu_lines, described)

    @staticmethod
    def _render_models(rows: list[_ModelRow]) -> Iterator[str]:
        yield family_header(MODEL_STATUS, _HELP[MODEL_STATUS])
        yield from _in_pieces(_model_lines, rows)


_PIECE = 500  # rows per piece of the answer: a few hundred KB, sent before the next is written

R = TypeVar("R")


def _in_pieces(lines: Callable[[R], Iterable[str]], rows: list[R]) -> Iterator[str]:
    for start in range(0, len(rows), _PIECE):
        yield "".join(line for row in rows[start : start + _PIECE] for line in lines(row))


def _phase_lines(row: _ServiceRow) -> Iterator[str]:
    for candidate in ISVC_PHASES:
        yield (
            f'{PHASE}{{inferenceservice="{row.name}",namespace="{row.namespace}",phase="{candidate}"}} '
            f"{1.0 if candidate == row.phase else 0.0}\n"
        )


def _info_lines(row: _ServiceRow) -> Iterator[str]:
    assert row.info is not None
    model, runtime, accelerator = row.info
    yield (
        f'{INFO}{{inferenceservice="{row.name}",namespace="{row.namespace}",model="{model}",'
        f'runtime="{runtime}",accelerator="{accelerator}"}} 1.0\n'
    )


def _replica_lines(row: _ServiceRow) -> Iterator[str]:
    for state, count in zip(REPLICA_STATES, row.replicas, strict=False):
        yield (
            f'{REPLICAS}{{inferenceservice="{row.name}",namespace="{row.namespace}",state="{state}"}} '
            f"{count}\n"
        )


def _gpu_lines(row: _ServiceRow) -> Iterator[str]:
    yield f'{GPUS}{{inferenceservice="{row.name}",namespace="{row.namespace}"}} {row.gpus}\n'


def _model_lines(row: _ModelRow) -> Iterator[str]:
    for candidate in MODEL_PHASES:
        yield (
            f'{MODEL_STATUS}{{model="{row.name}",namespace="{row.namespace}",phase="{candidate}"}} '
            f"{1.0 if candidate == row.phase else 0.0}\n"
        )
