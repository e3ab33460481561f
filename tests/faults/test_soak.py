"""The soak: the controller process under a steady stream of spec changes (by default 10 per second
over 1,000 services, for 30 minutes) against a control plane of its own. Its RSS, open descriptors
and sockets, threads and asyncio tasks must stay flat once warmed up, and it must keep up (every
change applied at the end). Prints the samples and a summary.

Not part of the default run (it is not cheap): `make soak` (30 minutes), or set
LLMKUBE_SOAK_SECONDS (and optionally LLMKUBE_SOAK_SERVICES, LLMKUBE_SOAK_RATE)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from statistics import mean
from typing import Any

import orjson
import pytest
from fault_support import API, MERGE, eventually, hf_model, installed_cluster, isvc
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.rest import KubeRest

SECONDS = float(os.environ.get("LLMKUBE_SOAK_SECONDS", "0"))
SERVICES = int(os.environ.get("LLMKUBE_SOAK_SERVICES", "1000"))
RATE = float(os.environ.get("LLMKUBE_SOAK_RATE", "10"))
SAMPLE_EVERY = max(5.0, min(60.0, SECONDS / 60))
NAMESPACES = 10  # services spread over a few namespaces, as in a real cluster

pytestmark = [
    pytest.mark.skipif(not SECONDS, reason="the soak runs with `make soak` (LLMKUBE_SOAK_SECONDS)"),
    pytest.mark.timeout(SECONDS + 1800),  # creating, converging and catching up come on top
]


@pytest.fixture(scope="module")
def soak_cluster() -> Iterator[LocalCluster]:
    # A /24 of Service IPs (the default of the local control plane) holds 254 Services.
    yield from installed_cluster("api", apiserver_args=("--service-cluster-ip-range=10.96.0.0/16",))


class Sampled:
    """The soak controller's process and the samples it prints."""

    def __init__(self) -> None:
        self.samples: list[dict[str, Any]] = []
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, kubeconfig: Path) -> None:
        script = Path(__file__).with_name("soak_controller.py")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            str(kubeconfig),
            str(SAMPLE_EVERY),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        async for line in self.process.stdout:
            with contextlib.suppress(orjson.JSONDecodeError):
                record = orjson.loads(line)
                if record.get("event") == "soak sample":
                    self.samples.append(record)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 40)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


def names() -> list[tuple[str, str]]:
    return [(f"soak-{i % NAMESPACES}", f"svc-{i}") for i in range(SERVICES)]


def change(admin: KubeRest, namespace: str, name: str, serial: int) -> None:
    """A spec change the controller must carry into the Deployment: a pod annotation."""
    body = {"spec": {"podAnnotations": {"soak/serial": str(serial)}}}
    path = admin.path_for(API, "InferenceService", namespace, name)
    admin.request("PATCH", path, body, content_type=MERGE)


def applied(admin: KubeRest, wanted: dict[tuple[str, str], int]) -> int:
    """How many services' Deployments carry the last change made to them."""
    done = 0
    for namespace in {ns for ns, _ in wanted}:
        for deployment in admin.list("apps/v1", "Deployment", namespace):
            key = (namespace, deployment["metadata"]["name"])
            if key in wanted:
                annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
                done += annotations.get("soak/serial") == str(wanted[key])
    return done


def drift(samples: list[dict[str, Any]], key: str) -> tuple[float, float, float]:
    """(mean of the first third after warm-up, mean of the last third, max - min after warm-up)."""
    steady = samples[len(samples) // 5 :]  # the first fifth is warm-up
    third = max(1, len(steady) // 3)
    values = [float(sample[key]) for sample in steady]
    return mean(values[:third]), mean(values[-third:]), max(values) - min(values)


async def test_soak(soak_cluster: LocalCluster) -> None:
    admin = soak_cluster.admin()
    for index in range(NAMESPACES):
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"soak-{index}"}})
        admin.create(hf_model("m"), namespace=f"soak-{index}")
    loop = asyncio.get_running_loop()
    services = names()

    def create_all() -> None:
        for namespace, name in services:
            admin.create(isvc(name), namespace=namespace)

    await loop.run_in_executor(None, create_all)
    controller = Sampled()
    assert soak_cluster.controller_kubeconfig is not None
    await controller.start(soak_cluster.controller_kubeconfig)
    try:
        started = time.monotonic()
        await eventually(
            lambda: (
                sum(len(admin.list("apps/v1", "Deployment", f"soak-{i}")) for i in range(NAMESPACES))
                == SERVICES
            ),
            within=600,
            what=f"{SERVICES} Deployments",
        )
        initial = time.monotonic() - started
        print(
            f"\nsoak: {SERVICES} services converged in {initial:.0f}s; {RATE:g} changes/s for {SECONDS:.0f}s"
        )

        rng = random.Random(5)
        wanted: dict[tuple[str, str], int] = {}
        serial = 0
        changing = time.monotonic()

        def change_for_a_second() -> None:
            nonlocal serial
            second = time.monotonic()
            for _ in range(int(RATE)):
                namespace, name = rng.choice(services)
                serial += 1
                change(admin, namespace, name, serial)
                wanted[(namespace, name)] = serial
                pause = (second + (serial % int(RATE) + 1) / RATE) - time.monotonic()
                if pause > 0:
                    time.sleep(pause)

        while time.monotonic() - changing < SECONDS:
            await loop.run_in_executor(None, change_for_a_second)
            assert controller.process is not None and controller.process.returncode is None, (
                "the controller died"
            )
        changes = serial
        caught_up_from = time.monotonic()
        await eventually(
            lambda: applied(admin, wanted) == len(wanted), within=300, what="every change applied"
        )
        lag = time.monotonic() - caught_up_from
        made = sum(len(admin.list("v1", "Service", f"soak-{i}")) for i in range(NAMESPACES))
        assert made == SERVICES, f"{made} Services for {SERVICES} InferenceServices"
        await asyncio.sleep(SAMPLE_EVERY)
    finally:
        await controller.stop()

    samples = [s for s in controller.samples if s["t"] >= initial]
    columns = ("t (s)", "RSS MiB", "fds", "sockets", "threads", "tasks", "requests", "queued")
    print(" ".join(f"{column:>9}" for column in columns))
    for s in samples:
        print(
            f"{s['t']:>9.0f} {s['rss'] / 2**20:>9.1f} {s['fds']:>9} {s['sockets']:>9} {s['threads']:>9} "
            f"{s['tasks']:>9} {s['requests']:>9} {s['queued']:>9}"
        )
    rss_first, rss_last, _ = drift(samples, "rss")
    summary = {key: drift(samples, key) for key in ("fds", "sockets", "threads", "tasks")}
    duration = samples[-1]["t"] - samples[0]["t"]
    requests = samples[-1]["requests"] - samples[0]["requests"]
    print(
        f"soak: {changes} changes in {SECONDS:.0f}s over {SERVICES} services, all applied {lag:.1f}s "
        f"after the last; {requests / duration:.1f} requests/s; "
        f"RSS {rss_first / 2**20:.1f} -> {rss_last / 2**20:.1f} MiB; "
        + ", ".join(
            f"{key} {first:.0f} -> {last:.0f} (range {spread:.0f})"
            for key, (first, last, spread) in summary.items()
        )
    )
    first, last = samples[0]["by_request"], samples[-1]["by_request"]
    per_change = {key: (last[key] - first.get(key, 0)) / changes for key in sorted(last)}
    print("requests per change: " + ", ".join(f"{k} {v:.2f}" for k, v in per_change.items() if v >= 0.01))
    assert len(samples) >= 6, "too few samples to judge"
    assert rss_last <= rss_first * 1.10 + 8 * 2**20, "RSS grew"
    for key, (_, _, spread) in summary.items():
        assert spread <= {"fds": 10, "sockets": 10, "threads": 4, "tasks": 20}[key], f"{key} not flat"
