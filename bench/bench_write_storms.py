"""Memory under write storms: the controller's RSS after each of several storms of spec changes.

On a local API server (tier "api"), `--services` Models + InferenceServices converge under the real
`llmkube controller` process; then `--storms` times: `--rate` spec changes per second (a pod
annotation of a random service, which the controller carries into its Deployment; with `--mix`
also context sizes, replica counts, env values and pod labels) for
`--duration` seconds, a wait until the controller has written nothing for a few seconds, and
`--pause` seconds of quiet. The controller's RSS (and glibc's heap figures, when memtrace runs it)
is read at the end of each pause: flat from storm to storm once warmed up, or not.

`--memtrace DIR` runs the controller under bench/memtrace.py: after each storm it writes what was
allocated and not freed since the previous storm, by allocation site (`DIR/diff-<n>.txt`).
`--source DIR` runs the controller from another copy of the package (see bench_queue_churn.py).
`--svg FILE` draws RSS per storm. `--controller-arg ARG` (repeatable) passes a flag to the
controller, `--controller-env NAME=VALUE` (repeatable) sets its environment. Each sample also
says where the resident memory lies (`memory_map_mib`: glibc's main heap, other anonymous
mappings, files; read from /proc/PID/smaps).

Usage: .venv/bin/python bench/bench_write_storms.py [--services 2000] [--rate 50] [--duration 120]
       [--storms 10] [--pause 30] [--memtrace /tmp/storms] [--svg bench/results/storms.svg]
Prints one JSON object; stores it in bench/results/write-storms-<label>-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_support import (
    ISVCS,
    NAMESPACE,
    AuditCounter,
    BenchCluster,
    OperatorSpec,
    RunningOperator,
    admin_client,
    bounded,
    create_workload,
    install,
    llmkube_operator,
    machine_info,
    memory_map,
    progress,
    rss_bytes,
    save_result,
    service_name,
    wait_for,
)

from llmkube.kube.rest import ApiClient

BENCH = Path(__file__).resolve().parent


def operator_spec(
    source: Path | None, memtrace: Path | None, extra: list[str], environment: list[str]
) -> OperatorSpec:
    spec = llmkube_operator()
    spec.command += "".join(f" {arg}" for arg in extra)
    if memtrace is not None:
        memtrace.mkdir(parents=True, exist_ok=True)
        script, _, arguments = spec.command.partition(" ")
        spec.command = (
            f"{sys.executable} {BENCH / 'memtrace.py'} --out {memtrace} --interval 1 --step 100000 "
            f"--top 25 --diff-on {memtrace / 'diff-now'} -- {script} {arguments}"
        )
    if source is not None:
        environment = [f"PYTHONPATH={source}", *environment]
    if environment:
        spec.command = f"env {' '.join(environment)} {spec.command}"
    return spec


async def converged(client: ApiClient, services: int) -> bool:
    items = await client.list_all(ISVCS, NAMESPACE)
    return len(items) == services and all((item.get("status") or {}).get("phase") for item in items)


def change_body(rng: random.Random, mix: bool, serial: int) -> dict[str, Any]:
    """A pod annotation with a new value; with `mix`, one of several kinds of spec change."""
    kind = rng.randrange(5) if mix else 0
    if kind == 1:
        return {"spec": {"contextSize": rng.choice([2048, 4096, 8192])}}
    if kind == 2:
        return {"spec": {"replicas": rng.choice([1, 2])}}
    if kind == 3:
        return {"spec": {"env": [{"name": "BENCH_SERIAL", "value": str(serial)}]}}
    if kind == 4:
        return {"spec": {"podLabels": {"bench/wave": f"w{serial % 997}"}}}
    return {"spec": {"podAnnotations": {"bench/serial": str(serial)}}}


async def storm(client: ApiClient, rng: random.Random, args: argparse.Namespace, serial: int) -> int:
    """`args.rate` changes per second for `args.duration` seconds; returns the next serial."""
    started = time.monotonic()
    total = int(args.rate * args.duration)

    async def change(number: int) -> None:
        due = started + number / args.rate
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        name = service_name(rng.randrange(args.services))
        await client.patch(ISVCS, name, change_body(rng, args.mix, serial + number), NAMESPACE)

    await bounded([lambda n=n: change(n) for n in range(total)], concurrency=16)
    return serial + total


def quiet(audit: AuditCounter, seconds: float) -> float:
    """Wait until the controller made no write for `seconds`; returns how long it took."""
    started = time.monotonic()
    audit.settle(quiet=seconds, limit=600)
    return time.monotonic() - started


def svg(points: list[float], path: Path, title: str) -> None:
    """RSS per storm as a small line chart (no plotting library needed)."""
    width, height, margin = 640, 320, 50
    low, high = min(points) - 2, max(points) + 2
    step = (width - 2 * margin) / max(1, len(points) - 1)

    def y(value: float) -> float:
        return height - margin - (value - low) / (high - low) * (height - 2 * margin)

    coordinates = " ".join(f"{margin + i * step:.1f},{y(v):.1f}" for i, v in enumerate(points))
    labels = "".join(
        f'<text x="{margin + i * step:.1f}" y="{height - margin + 18}" font-size="11" '
        f'text-anchor="middle">{i}</text>'
        for i in range(len(points))
    )
    ticks = "".join(
        f'<text x="{margin - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">{v:.0f}</text>'
        for v in (low, (low + high) / 2, high)
    )
    path.write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f'<rect width="100%" height="100%" fill="white"/>'
        f'<text x="{width / 2}" y="20" font-size="13" text-anchor="middle">{title}</text>'
        f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{coordinates}"/>'
        f"{labels}{ticks}"
        f'<text x="{width / 2}" y="{height - 8}" font-size="11" text-anchor="middle">'
        f"after storm (0: converged, before the first)</text>"
        f'<text x="12" y="{height / 2}" font-size="11" transform="rotate(-90 12 {height / 2})" '
        f'text-anchor="middle">RSS MiB</text></svg>\n'
    )


async def run(args: argparse.Namespace, source: Path | None, memtrace: Path | None) -> dict[str, Any]:
    spec = operator_spec(source, memtrace, args.controller_arg, args.controller_env)
    rng = random.Random(args.seed)
    samples: list[dict[str, Any]] = []
    with BenchCluster("api") as cluster:
        install(cluster, spec.crds, spec.rbac)
        assert cluster.controller_kubeconfig is not None and cluster.audit_log is not None
        progress(f"creating {args.services} Models and InferenceServices")
        await create_workload(cluster, args.services)
        operator = RunningOperator(spec, cluster.controller_kubeconfig, cluster.workdir / "controller.log")
        audit = AuditCounter(cluster.audit_log)
        try:
            async with await admin_client(cluster) as client:
                started = time.monotonic()
                for _ in range(1800):
                    if await converged(client, args.services):
                        break
                    await asyncio.sleep(1)
                else:
                    raise TimeoutError("not converged within 30 minutes")
                progress(f"converged in {time.monotonic() - started:.0f} s")
                quiet(audit, 5)

                def sample(storm_number: int) -> None:
                    if memtrace is not None:
                        (memtrace / "diff-now").touch()
                    rss = rss_bytes(operator.pid) / 2**20
                    where = memory_map(operator.pid)
                    samples.append(
                        {
                            "after_storm": storm_number,
                            "rss_mib": round(rss, 1),
                            "writes": audit.read(),
                            "memory_map_mib": where,
                        }
                    )
                    progress(
                        f"after storm {storm_number}: RSS {rss:.1f} MiB ({where}), "
                        f"{audit.total} writes so far"
                    )

                await asyncio.sleep(args.pause)
                sample(0)
                serial = 0
                for number in range(1, args.storms + 1):
                    serial = await storm(client, rng, args, serial)
                    settle = await asyncio.get_running_loop().run_in_executor(None, quiet, audit, 3.0)
                    progress(
                        f"storm {number}: {args.rate * args.duration:.0f} changes, quiet {settle:.0f} s later"
                    )
                    await asyncio.sleep(args.pause)
                    sample(number)
                if memtrace is not None:
                    await wait_for(lambda: not (memtrace / "diff-now").exists(), 120, "the last diff")
        finally:
            operator.stop()
    rss = [s["rss_mib"] for s in samples]
    warm = rss[2:] or rss  # the first storms grow the caches and the heap once
    per_storm = (warm[-1] - warm[0]) / max(1, len(warm) - 1)
    if args.svg:
        svg(rss, Path(args.svg), f"controller RSS, {args.services} services, {args.rate:g} changes/s storms")
    return {
        "benchmark": "write-storms",
        "label": args.label,
        "source": str(source) if source else "this checkout",
        "workload": {
            "services": args.services,
            "rate_per_second": args.rate,
            "storm_seconds": args.duration,
            "storms": args.storms,
            "pause_seconds": args.pause,
            "seed": args.seed,
            "mix": args.mix,
            "memtrace": bool(memtrace),
            "controller_args": args.controller_arg,
            "controller_env": args.controller_env,
        },
        "samples": samples,
        "rss_growth_per_storm_after_the_second_mib": round(per_storm, 2),
        "rss_range_after_the_second_mib": round(max(warm) - min(warm), 1),
        "rss_median_mib": round(statistics.median(rss), 1),
        "machine": machine_info(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--storms", type=int, default=10)
    parser.add_argument("--pause", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument(
        "--mix", action="store_true", help="several kinds of spec change, not only an annotation"
    )
    parser.add_argument("--memtrace", type=Path)
    parser.add_argument("--source", help="run the controller from this copy of the package")
    parser.add_argument("--svg", help="write RSS per storm as an SVG chart")
    parser.add_argument("--label", default="current")
    parser.add_argument(
        "--controller-arg",
        action="append",
        default=[],
        help="one more argument for the controller, e.g. --controller-arg=--heap-trim-interval=0",
    )
    parser.add_argument(
        "--controller-env",
        action="append",
        default=[],
        help="NAME=VALUE in the controller's environment, e.g. --controller-env=MALLOC_ARENA_MAX=2",
    )
    args = parser.parse_args()
    source = Path(args.source).resolve() if args.source else None
    result = asyncio.run(run(args, source, args.memtrace.resolve() if args.memtrace else None))
    print(json.dumps(result, indent=2))
    path = save_result(f"write-storms-{args.label}", result)
    progress(f"saved {path}")


if __name__ == "__main__":
    main()
