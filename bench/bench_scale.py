"""The operator at scale, against the API-server floor and (optionally) any other operator.

For each operator (llmkube, plus one given on the command line) and for the floor, on a fresh local
control plane each time (tier "api" by default: no pods, so 5,000-10,000 services fit), with N Models
and N CPU InferenceServices created before the operator starts:

- convergence: process start -> every service has a Deployment, a Service and a status phase and
  every Model a phase (seen on the benchmark's own watches); mutating requests per service (from the
  API server's audit log, the operator's user only); CPU seconds, CPU per reconcile
  (controller_runtime_reconcile_total); /readyz time;
- idle: a window with nothing changing: writes and CPU;
- latency: one user change per second (spec.contextSize of a different service each time): the time
  from the change on the InferenceService watch to the changed Deployment on the Deployment watch;
- restart: a new process against the converged cluster: time to /readyz, writes and CPU in a window;
- memory: the kernel's peak RSS (VmHWM) of the first process and of the restarted one.

The floor is a minimal asyncio client making exactly llmkube's writes (the same Deployment, Service,
status and PriorityClass bodies, computed by llmkube's pure planners before the clock starts) with
`--floor-concurrency` requests in flight and no informers: what the API server needs to take them.

An operator to compare with is given as a command line with {kubeconfig}, {metrics_port} and
{health_port} placeholders, its CRDs and its RBAC; every ClusterRole/Role in the RBAC is bound to the
identity the operator runs as. Without one, the table shows the reference figures of an earlier
side-by-side measurement (LLMKube v0.8.7 on the full tier; not re-run here).

Usage:
  .venv/bin/python bench/bench_scale.py --services 1000 [--repeat 3] [--floor-concurrency 16]
  .venv/bin/python bench/bench_scale.py --services 1000 --operator reference \\
      --command "/path/manager --kubeconfig={kubeconfig} --metrics-bind-address=127.0.0.1:{metrics_port} \\
                 --health-probe-bind-address=127.0.0.1:{health_port}" \\
      --crds /path/config/crd/bases --rbac /path/config/rbac
Prints the table (and one JSON object per measurement to stderr as it goes); stores everything in
bench/results/scale-N<services>-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_support import (
    ISVCS,
    MODELS,
    NAMESPACE,
    AuditCounter,
    BenchCluster,
    Observer,
    OperatorSpec,
    RunningOperator,
    admin_client,
    bounded,
    cpu_seconds,
    create_workload,
    install,
    llmkube_operator,
    machine_info,
    peak_rss_bytes,
    progress,
    save_result,
    service_name,
    wait_for,
)

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.controllers.inferenceservice import encode_status
from llmkube.controllers.model import encode_status as encode_model_status
from llmkube.kube.apply.compare import clean_intent
from llmkube.kube.clock import format_micro_time
from llmkube.kube.control.status_writer import status_body
from llmkube.kube.events.recorder import object_reference
from llmkube.kube.resource import DEPLOYMENTS, EVENTS, PRIORITY_CLASSES, SERVICES, Resource
from llmkube.kube.rest import ApiClient, load_client_config
from llmkube.plan.events import PlannedEvent
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import plan_inference_service
from llmkube.plan.inferenceservice.priority import priority_classes
from llmkube.plan.model.decision import ActionKind, ModelPlanConfig
from llmkube.plan.model.events import model_events
from llmkube.plan.model.facts import ModelFacts, ProbeFailure, ProbeOutcome
from llmkube.plan.model.planner import plan_model

#: An earlier side-by-side measurement of the Go reference (LLMKube v0.8.7, full tier), per N.
REFERENCE_FIGURES = {
    200: {"writes_per_service": "16-57", "idle_writes_60s": "9,900-17,200", "peak_rss_mib": 72,
          "restart_cpu_s": 1.0},
    1000: {"writes_per_service": "9-37", "idle_writes_60s": "9,900-17,200", "restart_writes_60s": 4040,
           "peak_rss_mib": 133},
}  # fmt: skip

REFERENCE_KEYS = {
    "idle_writes": "idle_writes_60s",
    "restart_writes": "restart_writes_60s",
    "converge_writes_per_service": "writes_per_service",
    "restart_cpu_seconds": "restart_cpu_s",
    "peak_rss_mib": "peak_rss_mib",
}

MIB = 2**20


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


# -- the floor -------------------------------------------------------------------------------------

Write = tuple[Resource, dict[str, Any], str | None]


def event_writes(regarding: dict[str, Any], events: Any, now: datetime) -> list[Write]:
    """The Events llmkube records (one create each: names are unique, nothing to aggregate)."""
    writes: list[Write] = []
    for index, event in enumerate(events):
        assert isinstance(event, PlannedEvent)
        name = f"{regarding['metadata']['name']}.{int(now.timestamp() * 1e9) + index:x}"
        body = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {"name": name, "namespace": regarding["metadata"]["namespace"]},
            "eventTime": format_micro_time(now),
            "reportingController": "llmkube-floor",
            "reportingInstance": "bench",
            "action": "Reconcile",
            "reason": event.reason,
            "note": event.message,
            "type": event.type,
            "regarding": object_reference(regarding),
        }
        writes.append((EVENTS, body, None))
    return writes


async def floor_writes(client: ApiClient) -> list[Write]:
    """Exactly the writes llmkube makes to converge the workload, computed by its pure planners from
    one LIST of each kind (untimed): per service the Model status, the Deployment, the Service and
    the InferenceService status, and the Events either records; and the five PriorityClasses once."""
    now = datetime.now(UTC)
    config = OperatorConfig(model_cache_path="")
    classes = priority_classes()
    values = {pc["metadata"]["name"]: int(pc["value"]) for pc in classes}
    models = {m["metadata"]["name"]: m for m in await client.list_all(MODELS, NAMESPACE)}
    writes: list[Write] = [(PRIORITY_CLASSES, clean_intent(pc), None) for pc in classes]
    for raw in sorted(await client.list_all(ISVCS, NAMESPACE), key=lambda o: o["metadata"]["name"]):
        raw.setdefault("apiVersion", ISVCS.api_version)
        raw.setdefault("kind", ISVCS.kind)
        raw_model = {**models[raw["spec"]["modelRef"]], "apiVersion": MODELS.api_version, "kind": MODELS.kind}
        # The controller's HEAD of the (unresolvable) source fails: a failed probe is indeterminate.
        facts = ModelFacts()
        decision = plan_model(Model.model_validate(raw_model), facts, now, ModelPlanConfig(cache_path=""))
        if decision.action.kind is ActionKind.PROBE_FINGERPRINT:
            facts = replace(facts, probe=ProbeOutcome(failure=ProbeFailure.CONNECTION, detail="DNS"))
            decision = plan_model(Model.model_validate(raw_model), facts, now, ModelPlanConfig(cache_path=""))
        assert decision.action.kind is ActionKind.NONE, decision.action
        ready_model = Model.model_validate(raw_model).model_copy(update={"status": decision.status})
        isvc = InferenceService.model_validate(raw)
        plan = plan_inference_service(
            isvc, ready_model, ObservedState(now=now, priority_classes=values), config
        )
        assert plan.deployment is not None and plan.service is not None
        model_status = status_body(raw_model, encode_model_status(decision.status))
        isvc_status = status_body(raw, encode_status(plan.status))
        writes += [
            (MODELS, {"apiVersion": MODELS.api_version, "kind": MODELS.kind, **model_status}, "status"),
            (
                DEPLOYMENTS,
                {"apiVersion": "apps/v1", "kind": "Deployment", **clean_intent(plan.deployment)},
                None,
            ),
            (SERVICES, {"apiVersion": "v1", "kind": "Service", **clean_intent(plan.service)}, None),
            (ISVCS, {"apiVersion": ISVCS.api_version, "kind": ISVCS.kind, **isvc_status}, "status"),
        ]
        writes += event_writes(raw_model, model_events(None, decision.status), now)
        writes += event_writes(raw, plan.events, now)
    return writes


async def measure_floor(args: argparse.Namespace, spec: OperatorSpec) -> dict[str, Any]:
    count = args.services
    with BenchCluster(args.tier) as cluster:
        install(cluster, spec.crds, spec.rbac)
        created = await create_workload(cluster, count)
        result: dict[str, Any] = {"who": "floor", "services": count, "create_seconds": round(created, 1)}
        audit = AuditCounter(cluster.writes_log)
        audit.settle()
        baseline = audit.total
        async with await admin_client(cluster) as admin:
            observer = Observer(admin)
            observer.start()
            await observer.synced()
            async with ApiClient.from_config(
                await load_client_config(cluster.controller_kubeconfig)
            ) as client:
                writes = await floor_writes(client)
                result["load_average_start"] = os.getloadavg()[0]
                started = time.perf_counter()

                def job(write: Write) -> Any:
                    resource, body, subresource = write
                    if resource is EVENTS:
                        return lambda: client.create(EVENTS, body)
                    return lambda: client.apply(
                        resource, body, field_manager="llmkube-controller", subresource=subresource
                    )

                await bounded([job(write) for write in writes], args.floor_concurrency)
                result["writes_done_seconds"] = round(time.perf_counter() - started, 2)
                seen = await wait_for(lambda: observer.converged(count), 600, "floor convergence")
                result["converge_seconds"] = round(time.perf_counter() - started, 2)
                del seen
            await observer.stop()
        result["writes"] = audit.settle() - baseline
        result["writes_per_service"] = round(result["writes"] / count, 2)
        result["writes_by_resource"] = dict(audit.by_resource)
        result["concurrency"] = args.floor_concurrency
        result["load_average_end"] = os.getloadavg()[0]
    return result


# -- an operator -----------------------------------------------------------------------------------


async def measure_operator(args: argparse.Namespace, spec: OperatorSpec) -> dict[str, Any]:
    count = args.services
    result: dict[str, Any] = {"who": spec.name, "services": count}
    with BenchCluster(args.tier) as cluster:
        install(cluster, spec.crds, spec.rbac)
        result["create_seconds"] = round(await create_workload(cluster, count), 1)
        audit = AuditCounter(cluster.writes_log)
        audit.settle()
        async with await admin_client(cluster) as admin:
            observer = Observer(admin)
            observer.start()
            await observer.synced()
            result["load_average_start"] = os.getloadavg()[0]
            log = cluster.logs_dir / f"operator-{spec.name}.log"
            operator = RunningOperator(spec, cluster.controller_kubeconfig, log)
            try:
                await phases(
                    args, operator, observer, audit, admin, result, cluster.controller_kubeconfig, log
                )
            finally:
                operator.stop()
                await observer.stop()
        result["writes_by_resource"] = dict(audit.by_resource)
        result["load_average_end"] = os.getloadavg()[0]
    return result


async def phases(
    args: argparse.Namespace,
    operator: RunningOperator,
    observer: Observer,
    audit: AuditCounter,
    admin: ApiClient,
    result: dict[str, Any],
    kubeconfig: Path,
    log: Path,
) -> None:
    count = args.services
    baseline = audit.total
    ready_at: list[float] = []

    def converged() -> bool:
        if not ready_at and operator.ready():
            ready_at.append(time.perf_counter() - operator.started)
        return observer.converged(count)

    await wait_for(converged, args.limit, f"{operator.spec.name} convergence", interval=0.1)
    result["converge_seconds"] = round(time.perf_counter() - operator.started, 2)
    result["ready_seconds"] = round(ready_at[0], 2) if ready_at else None
    result["converge_cpu_seconds"] = round(cpu_seconds(operator.pid), 2)
    await asyncio.sleep(2)
    writes = audit.settle() - baseline
    reconciles = operator.reconciles()
    result["converge_writes_per_service"] = round(writes / count, 2)
    result["converge_reconciles"] = reconciles
    result["converge_cpu_ms_per_reconcile"] = (
        round(1000 * result["converge_cpu_seconds"] / reconciles, 2) if reconciles else None
    )
    progress(f"{operator.spec.name}: converged in {result['converge_seconds']} s, {writes / count:.2f} w/svc")

    # Idle: nothing changes.
    cpu, written, reconciled = cpu_seconds(operator.pid), audit.read(), reconciles or 0
    await asyncio.sleep(args.idle)
    result["idle_window_seconds"] = args.idle
    result["idle_writes"] = audit.settle() - written
    result["idle_cpu_seconds"] = round(cpu_seconds(operator.pid) - cpu, 2)
    result["idle_reconciles"] = (operator.reconciles() or 0) - reconciled

    # Latency: one user change per second.
    if args.changes:
        cpu, reconciled = cpu_seconds(operator.pid), operator.reconciles() or 0
        result["latency_ms"] = await latency(args, observer, admin)
        result["latency_cpu_seconds"] = round(cpu_seconds(operator.pid) - cpu, 2)
        changed_reconciles = (operator.reconciles() or 0) - reconciled
        result["latency_cpu_ms_per_reconcile"] = (
            round(1000 * result["latency_cpu_seconds"] / changed_reconciles, 2)
            if changed_reconciles
            else None
        )
    result["peak_rss_mib"] = round(peak_rss_bytes(operator.pid) / MIB, 1)
    operator.stop()

    # Restart against the converged cluster.
    audit.settle()
    written = audit.total
    restarted = RunningOperator(operator.spec, kubeconfig, log, start="restart")
    try:
        result["restart_ready_seconds"] = round(
            await wait_for(restarted.ready, args.limit, "restart ready", 0.05), 2
        )
        result["restart_ready_cpu_seconds"] = round(cpu_seconds(restarted.pid), 2)
        await asyncio.sleep(max(0.0, args.restart_window - (time.perf_counter() - restarted.started)))
        result["restart_window_seconds"] = args.restart_window
        result["restart_writes"] = audit.settle() - written
        result["restart_cpu_seconds"] = round(cpu_seconds(restarted.pid), 2)
        result["restart_reconciles"] = restarted.reconciles()
        if result["restart_reconciles"]:
            result["restart_cpu_ms_per_reconcile"] = round(
                1000 * result["restart_cpu_seconds"] / result["restart_reconciles"], 2
            )
        result["restart_peak_rss_mib"] = round(peak_rss_bytes(restarted.pid) / MIB, 1)
    finally:
        restarted.stop()


async def latency(args: argparse.Namespace, observer: Observer, admin: ApiClient) -> dict[str, Any]:
    """One spec change per second, each to another service; ms from the change on the
    InferenceService watch to the matching Deployment on the Deployment watch."""
    count = args.services
    names = [service_name((index * count) // args.changes) for index in range(args.changes)]
    sizes = {name: 8192 + index for index, name in enumerate(names)}
    for name in names:
        tick = time.perf_counter()
        await admin.patch(ISVCS, name, {"spec": {"contextSize": sizes[name]}}, NAMESPACE)
        await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
    seen = observer.seen

    def applied(name: str) -> bool:
        return seen.deployment_seen.get(name, (None,))[0] == sizes[name]

    await wait_for(lambda: all(applied(name) for name in names), 60, "every change applied")
    values = [1000 * (seen.deployment_seen[name][1] - seen.spec_seen[name][1]) for name in names]
    return {
        "changes": len(values),
        "p50": round(percentile(values, 0.5), 1),
        "p99": round(percentile(values, 0.99), 1),
        "max": round(max(values), 1),
    }


# -- the table -------------------------------------------------------------------------------------

ROWS = (
    ("converge_seconds", "convergence, s (process start -> all converged)"),
    ("converge_writes_per_service", "mutating requests per service to converge"),
    ("converge_cpu_ms_per_reconcile", "CPU ms per reconcile, convergence"),
    ("converge_cpu_seconds", "CPU s, convergence"),
    ("idle_writes", "mutating requests in the idle window"),
    ("idle_cpu_seconds", "CPU s in the idle window"),
    ("latency_p50", "change -> Deployment p50, ms"),
    ("latency_p99", "change -> Deployment p99, ms"),
    ("latency_cpu_ms_per_reconcile", "CPU ms per reconcile, one change/s"),
    ("restart_ready_seconds", "restart -> ready (caches synced), s"),
    ("restart_writes", "mutating requests in the restart window"),
    ("restart_cpu_seconds", "CPU s, restart window"),
    ("peak_rss_mib", "peak RSS, MiB"),
    ("restart_peak_rss_mib", "peak RSS after a restart, MiB"),
)


def flatten(result: dict[str, Any]) -> dict[str, Any]:
    flat = dict(result)
    for key, value in (result.get("latency_ms") or {}).items():
        flat[f"latency_{key}"] = value
    return flat


def median_of(results: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in map(flatten, results) if isinstance(r.get(key), int | float)]
    return round(statistics.median(values), 2) if values else None


def table(args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]]) -> str:
    names = [name for name in runs if name != "floor"]
    reference = REFERENCE_FIGURES.get(args.services) if "reference" not in runs else None
    header = ["metric", *names]
    if reference is not None:
        header.append("reference (v0.8.7)")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, label in ROWS:
        cells = [label]
        for name in names:
            value = median_of(runs[name], key)
            cells.append("" if value is None else f"{value:g}")
        if reference is not None:
            ref_key = REFERENCE_KEYS.get(key)
            cells.append(str(reference.get(ref_key, "")) if ref_key else "")
        lines.append("| " + " | ".join(cells) + " |")
    if "floor" in runs:
        floor = median_of(runs["floor"], "converge_seconds")
        ours = median_of(runs.get("llmkube", []), "converge_seconds")
        lines.append(
            f"\nAPI-server floor: {floor} s to converge ({median_of(runs['floor'], 'writes_per_service')} "
            f"writes/service, {args.floor_concurrency} in flight); llmkube / floor = "
            f"{round(ours / floor, 2) if ours and floor else '?'}"
        )
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tier", choices=["api", "full"], default="api")
    parser.add_argument("--floor-concurrency", type=int, default=16)
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--no-llmkube", action="store_true")
    parser.add_argument("--idle", type=float, default=60.0, help="idle window, s")
    parser.add_argument("--restart-window", type=float, default=60.0, help="s after a restart")
    parser.add_argument("--changes", type=int, default=60, help="user changes, one per second (0: none)")
    parser.add_argument("--limit", type=float, default=1800.0, help="give up waiting after this many s")
    parser.add_argument("--operator", help="name of another operator to measure")
    parser.add_argument("--command", help="its command line ({kubeconfig}, {metrics_port}, {health_port})")
    parser.add_argument("--crds", action="append", type=Path, default=[], help="its CRDs (file or dir)")
    parser.add_argument("--rbac", action="append", type=Path, default=[], help="its RBAC (file or dir)")
    parser.add_argument("--ready-url", default="http://127.0.0.1:{health_port}/readyz")
    parser.add_argument(
        "--llmkube-prefix",
        default="",
        help="run llmkube under this command, e.g. a profiler: 'py-spy record -f raw -o /tmp/{start}.txt --'",
    )
    return parser.parse_args()


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    args = parse_args()
    ours = llmkube_operator()
    if args.llmkube_prefix:
        ours.command = f"{args.llmkube_prefix} {ours.command}"
        ours.stop_signal = signal.SIGINT
    operators = [] if args.no_llmkube else [ours]
    if args.operator:
        if not args.command or not args.crds:
            raise SystemExit("--operator needs --command and --crds (and usually --rbac)")
        operators.append(
            OperatorSpec(args.operator, args.command, args.crds, args.rbac, ready_url=args.ready_url)
        )
    runs: dict[str, list[dict[str, Any]]] = {}
    for repetition in range(args.repeat):
        if not args.no_floor:
            progress(f"floor, N={args.services}, run {repetition + 1}/{args.repeat}")
            runs.setdefault("floor", []).append(await measure_floor(args, ours))
            print(json.dumps(runs["floor"][-1]), file=sys.stderr)
        for spec in operators:
            progress(f"{spec.name}, N={args.services}, run {repetition + 1}/{args.repeat}")
            runs.setdefault(spec.name, []).append(await measure_operator(args, spec))
            print(json.dumps(runs[spec.name][-1]), file=sys.stderr)
    rendered = table(args, runs)
    record = {
        "benchmark": "scale",
        "command": " ".join(sys.argv),
        "machine": machine_info(),
        "services": args.services,
        "tier": args.tier,
        "medians": {
            name: {key: median_of(results, key) for key, _ in ROWS} for name, results in runs.items()
        },
        "runs": runs,
        "table": rendered,
    }
    path = save_result(f"scale-N{args.services}", record)
    print(rendered)
    print(f"\nstored in {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")


if __name__ == "__main__":
    asyncio.run(main())
