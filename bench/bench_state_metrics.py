"""One Prometheus scrape of the state gauges (llmkube_inferenceservice_*, llmkube_model_status) at N
services: CPU, memory allocated while it runs (tracemalloc peak), the size of the answer.

The gauges are computed from the informer caches at scrape time (controllers/state_metrics.py), so
their cost grows with N and is paid on every scrape. The caches here are the controller's own
compact stores, filled with the bench workload's objects (bench/scale_support.py) carrying the
statuses our planners give them: a Ready Model, a Creating InferenceService (the phase a
cluster without pods leaves them in). No API server is needed.

Usage: .venv/bin/python bench/bench_state_metrics.py [--services 1000 10000] [--scrapes 3]
"""

import argparse
import gc
import json
import time
import tracemalloc
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry
from scale_support import inference_service, machine_info, model, save_result

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.controllers.inferenceservice import encode_status as encode_isvc_status
from llmkube.controllers.model import encode_status as encode_model_status
from llmkube.controllers.state_metrics import StateMetrics
from llmkube.kube.cache import Store
from llmkube.kube.exposition import add_renderer, exposition_chunks
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import plan_inference_service
from llmkube.plan.model.facts import ModelFacts
from llmkube.plan.model.planner import plan_model

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def with_identity(document: dict[str, Any], index: int) -> dict[str, Any]:
    meta = {
        **document["metadata"],
        "uid": f"00000000-0000-4000-8000-{index:012d}",
        "resourceVersion": str(1000 + index),
        "generation": 1,
        "creationTimestamp": "2026-12-01T00:00:00Z",
    }
    return {**document, "metadata": meta}


def filled_stores(count: int) -> tuple[Store, Store]:
    services, models = Store(compact=True), Store(compact=True)
    config = OperatorConfig()
    for index in range(count):
        wire_model = with_identity(model(index), index)
        ready = plan_model(Model.model_validate(wire_model), ModelFacts(), NOW).status
        wire_model["status"] = encode_model_status(ready)
        models.upsert(wire_model)
        wire_isvc = with_identity(inference_service(index), index)
        isvc = InferenceService.model_validate(wire_isvc)
        planned = plan_inference_service(
            isvc, Model.model_validate(wire_model), ObservedState(now=NOW), config
        )
        wire_isvc["status"] = encode_isvc_status(planned.status)
        services.upsert(wire_isvc)
    return services, models


def scrape(registry: CollectorRegistry) -> dict[str, Any]:
    gc.collect()
    tracemalloc.start()
    cpu = time.process_time()
    answer = 0
    series = 0
    for chunk in exposition_chunks(registry):  # as the /metrics handler sends it, piece by piece
        answer += len(chunk)
        series += sum(1 for line in chunk.splitlines() if line and not line.startswith(b"#"))
    cpu = time.process_time() - cpu
    kept, peak = tracemalloc.get_traced_memory()  # kept: what the scrape left allocated (its rows)
    tracemalloc.stop()
    return {
        "cpu_seconds": round(cpu, 3),
        "allocated_peak_mib": round(peak / 2**20, 1),
        "kept_mib": round(kept / 2**20, 1),
        "bytes": answer,
        "series": series,
    }


def published(services: Store, models: Store) -> CollectorRegistry:
    """A registry answering with the state gauges of these stores, as controllers/metrics.py wires it."""
    state = StateMetrics()
    state.publish_services(services, lambda: (), models)
    state.publish_models(models)
    registry = CollectorRegistry()
    registry.register(state)
    add_renderer(state.render, registry)
    return registry


def scrape_cpu(registry: CollectorRegistry) -> float:
    started = time.process_time()
    for _ in exposition_chunks(registry):
        pass
    return time.process_time() - started


def measure(count: int, scrapes: int) -> dict[str, Any]:
    services, models = filled_stores(count)
    # CPU without tracemalloc (it slows allocation-heavy code several times); memory with it, each
    # on a registry of its own so that both see a first scrape (which derives every row).
    timed = published(services, models)
    first_cpu = scrape_cpu(timed)
    cpu = min(scrape_cpu(timed) for _ in range(scrapes))
    traced = published(services, models)
    first = scrape(traced)
    later = min((scrape(traced) for _ in range(scrapes)), key=lambda run: run["allocated_peak_mib"])
    return {
        "services": count,
        "first_scrape_cpu_seconds": round(first_cpu, 3),
        "first_scrape_allocated_peak_mib": first["allocated_peak_mib"],
        "rows_kept_mib": first["kept_mib"],
        "cpu_seconds_per_scrape": round(cpu, 3),
        "allocated_peak_mib": later["allocated_peak_mib"],
        "answer_bytes": later["bytes"],
        "series": later["series"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--scrapes", type=int, default=3)
    args = parser.parse_args()
    result = {
        "benchmark": "state_metrics",
        "machine": machine_info(),
        "runs": [measure(count, args.scrapes) for count in args.services],
    }
    print(json.dumps(result, indent=2))
    save_result(f"state-metrics-N{'-'.join(map(str, args.services))}", result)


if __name__ == "__main__":
    main()
