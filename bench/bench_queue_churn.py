"""GPU-queue churn: how many status writes the controller makes for services whose spec never changed.

On the full tier (kube-scheduler and kwok nodes with 2 + 1 GPUs), the real `llmkube controller`
process; critical services hold every GPU, so everything else waits in the GPU queue:

- `--stable` services (one GPU, priority normal) are created first and never touched: each waits
  for the whole run, and every write of its status is a write with no spec change;
- then, for `--seconds`, `--rate` changes per second of a churning population (at most
  `--churners` at a time, one GPU each): a new service of random priority (low, normal or high:
  a high one enters ahead of every stable service, moving all of them), a deletion (those behind it
  move up), or a priority change.

Counted from the benchmark's own watch of the InferenceServices: every status change of an object
whose metadata.generation did not move, per service, during the churn and until the queue is right
and quiet again. Also: the controller's status patches in the API server's audit log, and how long
after the last change every stored queuePosition was right.

`--source DIR` runs the controller from another copy of the package (PYTHONPATH=DIR), e.g. the
commit before a change: `git archive <commit> llmkube | tar -x -C /tmp/before`. The workload is
the same random sequence (`--seed`) each time.

Usage: .venv/bin/python bench/bench_queue_churn.py [--stable 40] [--rate 2] [--seconds 60]
       [--source /tmp/before] [--label before]
Prints one JSON object; stores it in bench/results/queue-churn-<label>-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llmkube_testing.rest import load_yaml_documents
from scale_support import (
    ISVCS,
    MODELS,
    REPO,
    AuditCounter,
    BenchCluster,
    OperatorSpec,
    RunningOperator,
    admin_client,
    install,
    llmkube_operator,
    machine_info,
    progress,
    save_result,
    wait_for,
)

from llmkube.kube.cache import Change, Informer
from llmkube.kube.errors import NotFound
from llmkube.kube.rest import ApiClient
from llmkube.plan.inferenceservice.queue import GpuQueue, QueueEntry

NAMESPACE = "churn"
PRIORITIES = {"low": 1_000, "normal": 10_000, "high": 100_000, "critical": 1_000_000}


def service(name: str, gpus: int, priority: str) -> dict[str, Any]:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "modelRef": "gpu-model",
            "skipModelInit": True,
            "resources": {"gpu": gpus},
            "priority": priority,
        },
    }


class StatusWrites:
    """Counts, per service, the status changes that came without a spec change (generation kept)."""

    def __init__(self, client: ApiClient) -> None:
        self.informer = Informer(client, ISVCS, namespace=NAMESPACE)
        self.informer.add_handler(self._changed)
        self.counting = False
        self.writes: Counter[str] = Counter()
        self.last_write = time.monotonic()

    def _changed(self, change: Change) -> None:
        if change.type != "MODIFIED" or change.old_obj is None or change.new is None:
            return
        old, new = change.old_obj, change.new
        if (old.get("metadata") or {}).get("generation") != (new.get("metadata") or {}).get("generation"):
            return
        if old.get("status") != new.get("status"):
            self.last_write = time.monotonic()
            if self.counting:
                self.writes[new["metadata"]["name"]] += 1

    def positions_right(self) -> bool:
        """Every waiting service stores the position its priority and age give it."""
        waiting = [
            obj
            for obj in self.informer.store.objects()
            if (obj.get("status") or {}).get("phase") == "WaitingForGPU"
        ]
        queue = GpuQueue(
            QueueEntry(
                NAMESPACE,
                obj["metadata"]["name"],
                int(obj["status"].get("effectivePriority") or 0),
                _created(obj),
            )
            for obj in waiting
        )
        return all(
            obj["status"].get("queuePosition") == queue.position(NAMESPACE, obj["metadata"]["name"])
            for obj in waiting
        )


def _created(obj: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))


def operator_spec(source: Path | None) -> OperatorSpec:
    spec = llmkube_operator()
    spec.command += " --manage-priority-classes=false"
    if source is not None:
        # The entry script puts its own directory first on sys.path, then PYTHONPATH: `source` wins
        # over the editable install of this checkout.
        spec.command = f"env PYTHONPATH={source} {spec.command}"
    return spec


async def churn(client: ApiClient, rng: random.Random, args: argparse.Namespace) -> dict[str, int]:
    """`args.rate` changes per second for `args.seconds`; returns how many of each kind were made."""
    alive: list[str] = []
    made: Counter[str] = Counter()
    serial = 0
    started = time.monotonic()
    step = 1.0 / args.rate
    tick = 0
    while time.monotonic() - started < args.seconds:
        roll = rng.random()
        if not alive or (roll < 0.45 and len(alive) < args.churners):
            serial += 1
            name = f"churn-{serial:04d}"
            await client.create(ISVCS, service(name, 1, rng.choice(["low", "normal", "high"])))
            alive.append(name)
            made["create"] += 1
        elif roll < 0.75:
            name = alive.pop(rng.randrange(len(alive)))
            with contextlib.suppress(NotFound):
                await client.delete(ISVCS, name, NAMESPACE)
            made["delete"] += 1
        else:
            name = rng.choice(alive)
            priority = rng.choice(["low", "normal", "high"])
            await client.patch(ISVCS, name, {"spec": {"priority": priority}}, NAMESPACE)
            made["priority"] += 1
        tick += 1
        pause = started + tick * step - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
    return dict(made)


async def run(args: argparse.Namespace, source: Path | None) -> dict[str, Any]:
    spec = operator_spec(source)
    rng = random.Random(args.seed)
    with BenchCluster("full") as cluster:
        admin = install(cluster, spec.crds, spec.rbac)
        admin.apply_all(load_yaml_documents(REPO / "manifests" / "priorityclasses" / "priority_classes.yaml"))
        admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        assert cluster.controller_kubeconfig is not None and cluster.audit_log is not None
        log = cluster.workdir / "controller.log"
        operator = RunningOperator(spec, cluster.controller_kubeconfig, log)
        audit = AuditCounter(cluster.audit_log)
        async with await admin_client(cluster) as client:
            writes = StatusWrites(client)
            writes.informer.start()
            try:
                await wait_for(operator.ready, 120, "controller ready")
                await client.create(
                    MODELS,
                    {
                        "apiVersion": "inference.llmkube.dev/v1alpha1",
                        "kind": "Model",
                        "metadata": {"name": "gpu-model", "namespace": NAMESPACE},
                        "spec": {"source": "bench-org/gpu-model", "hardware": {"accelerator": "cuda"}},
                    },
                )
                await client.create(ISVCS, service("fill-2", 2, "critical"))
                await client.create(ISVCS, service("fill-1", 1, "critical"))
                stable = [f"stable-{index:03d}" for index in range(args.stable)]
                for name in stable:
                    await client.create(ISVCS, service(name, 1, "normal"))
                progress(f"{args.stable} stable services created; waiting for them to queue")

                def queued() -> bool:
                    phases = {
                        obj["metadata"]["name"]: (obj.get("status") or {}).get("phase")
                        for obj in writes.informer.store.objects()
                    }
                    return (
                        all(phases.get(name) == "WaitingForGPU" for name in stable)
                        and writes.positions_right()
                    )

                await wait_for(queued, 300, "every stable service queued at its position")
                await wait_for(lambda: time.monotonic() - writes.last_write > 3, 120, "status writes quiet")
                audit.settle()
                before = Counter(audit.by_resource)

                progress(f"churn: {args.rate:g} changes/s for {args.seconds:g} s")
                writes.counting = True
                made = await churn(client, rng, args)
                right_after = await wait_for(writes.positions_right, 300, "every queue position right")
                await wait_for(lambda: time.monotonic() - writes.last_write > 10, 300, "status writes quiet")
                writes.counting = False
                audit.settle()
                status_patches = sum(
                    count - before.get(what, 0)
                    for what, count in audit.by_resource.items()
                    if what == "patch inferenceservices/status"
                )
            finally:
                await writes.informer.stop()
                operator.stop()
    per_stable = [writes.writes.get(name, 0) for name in stable]
    return {
        "benchmark": "queue-churn",
        "label": args.label,
        "source": str(source) if source else "this checkout",
        "workload": {
            "stable": args.stable,
            "rate_per_second": args.rate,
            "seconds": args.seconds,
            "churners_at_most": args.churners,
            "seed": args.seed,
            "changes": made,
        },
        "stable_services": {
            "status_writes": sum(per_stable),
            "per_service_max": max(per_stable),
            "per_service_mean": round(statistics.mean(per_stable), 2),
        },
        "all_services": {
            "status_writes_without_spec_change": sum(writes.writes.values()),
            "per_service_max": max(writes.writes.values(), default=0),
        },
        "controller_status_patches_in_audit_log": status_patches,
        "positions_right_after_last_change_s": round(right_after, 1),
        "machine": machine_info(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stable", type=int, default=40)
    parser.add_argument("--rate", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--churners", type=int, default=20)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--source", help="run the controller from this copy of the package")
    parser.add_argument("--label", default="current")
    args = parser.parse_args()
    result = asyncio.run(run(args, Path(args.source).resolve() if args.source else None))
    print(json.dumps(result, indent=2))
    path = save_result(f"queue-churn-{args.label}", result)
    progress(f"saved {path}")


if __name__ == "__main__":
    main()
