"""Two `llmkube controller` processes against the real API server: one leader at a time, even when
the leader is cut off from the API server (renewals blocked by a stalled TCP relay in front of it
only) or finds another holder in its Lease; and a SIGTERM during a model copy.

The failover test prints its figures (run with -s to see them): how long after its last renewal
the old leader stopped, and how long after it the standby took over."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from llmkube_testing.controller_process import ControllerProcess, controller_args
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.tcpproxy import TcpProxy, kubeconfig_through

from llmkube.api.crds import all_crds
from llmkube.kube.clock import format_micro_time, parse_time
from llmkube.kube.errors import Conflict, NotFound
from llmkube.kube.resource import LEASES
from llmkube.kube.rest import ApiClient, load_client_config
from llmkube.manager import DEFAULT_LEASE_NAME

# Models here come from local files: the namespaces allow them, as an admin would.
pytestmark = [pytest.mark.integration, pytest.mark.local_sources]

API = "inference.llmkube.dev/v1alpha1"
FAST = ["--leader-elect-lease-duration=4", "--leader-elect-renew-deadline=3", "--leader-elect-retry-period=1"]


@pytest.fixture(scope="module")
def crds(api_cluster: ClusterHandle) -> None:
    apply_manifests(api_cluster, list(all_crds()))


@pytest.fixture
async def client(api_cluster: ClusterHandle) -> AsyncIterator[ApiClient]:
    async with ApiClient.from_config(await load_client_config(api_cluster.kubeconfig)) as api:
        yield api


@pytest.fixture
async def processes() -> AsyncIterator[list[ControllerProcess]]:
    started: list[ControllerProcess] = []
    yield started
    for process in started:
        await process.kill()


async def relay(api_cluster: ClusterHandle, tmp_path: Path, name: str) -> tuple[TcpProxy, Path]:
    server = urlsplit(api_cluster.server)
    proxy = await TcpProxy.start(server.hostname or "127.0.0.1", server.port or 443)
    return proxy, kubeconfig_through(proxy, api_cluster.kubeconfig, tmp_path / f"kubeconfig-{name}")


@dataclass(frozen=True)
class LeaseSeen:
    holder: str
    renew_time: datetime | None
    acquire_time: datetime | None


async def watch_lease(client: ApiClient, namespace: str, seen: list[LeaseSeen]) -> None:
    """Poll the Lease (10/s) and keep every distinct record."""
    while True:
        with contextlib.suppress(NotFound):
            spec = (await client.get(LEASES, DEFAULT_LEASE_NAME, namespace))["spec"]
            record = LeaseSeen(
                holder=spec.get("holderIdentity") or "",
                renew_time=parse_time(spec["renewTime"]) if spec.get("renewTime") else None,
                acquire_time=parse_time(spec["acquireTime"]) if spec.get("acquireTime") else None,
            )
            if not seen or seen[-1] != record:
                seen.append(record)
        await asyncio.sleep(0.1)


async def until(condition: Any, within: float, what: str) -> None:
    try:
        async with asyncio.timeout(within):
            while not condition():  # noqa: ASYNC110 - state of other processes
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"no {what} within {within}s") from None


async def phase_reached(
    client: ApiClient, namespace: str, name: str, phase: str, within: float
) -> dict[str, Any]:
    async with asyncio.timeout(within):
        while (status := await model_status(client, namespace, name)).get("phase") != phase:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
    return status


def make_sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as file:
        file.truncate(size)  # no disk blocks: a copy writes them


def file_size(path: Path) -> int:
    return path.stat().st_size


async def test_a_leader_cut_off_from_the_api_server_stops_before_the_standby_takes_over(
    api_cluster: ClusterHandle,
    crds: None,
    client: ApiClient,
    namespace: str,
    tmp_path: Path,
    processes: list[ControllerProcess],
) -> None:
    """controller-runtime's timings (15 s lease, 10 s renew deadline, 2 s retry period)."""
    proxy_a, kubeconfig_a = await relay(api_cluster, tmp_path, "a")
    proxy_b, kubeconfig_b = await relay(api_cluster, tmp_path, "b")
    cache = tmp_path / "cache"
    a = await ControllerProcess("leader-a", controller_args(kubeconfig_a, namespace, cache)).start()
    processes.append(a)
    await a.wait_for_log("controllers started", within=60)
    b = await ControllerProcess("standby-b", controller_args(kubeconfig_b, namespace, cache)).start()
    processes.append(b)
    await b.wait_for_log("attempting to acquire leader lease", within=60)
    seen: list[LeaseSeen] = []
    poller = asyncio.create_task(watch_lease(client, namespace, seen))
    try:
        await asyncio.sleep(5)  # steady state: a renews every 2 s, b keeps trying
        renewals = len(seen)
        await until(lambda: len(seen) > renewals, 10, "a renewal")
        proxy_a.stall()  # right after a renewal: a can no longer reach the API server
        await until(lambda: seen[-1].holder not in ("", a.identity), 60, "b takes over")
        lost = await a.wait_for_log("failed to renew the leader lease within the renew deadline", within=30)
        assert await a.wait_exit(within=30) == 1, a.tail()

        last_renewal = max(r.renew_time for r in seen if r.holder == a.identity and r.renew_time)
        taken_over = seen[-1].acquire_time
        assert seen[-1].holder == b.identity and taken_over is not None
        stopped_after = (ControllerProcess.time_of(lost) - last_renewal).total_seconds()
        takeover_after = (taken_over - last_renewal).total_seconds()
        print(
            f"\nfailover: old leader stopped {stopped_after:.1f}s after its last renewal, "
            f"the standby took over {takeover_after:.1f}s after it"
        )
        assert stopped_after <= 10.0 + 0.5  # the renew deadline, counted from the last renewal
        assert takeover_after >= 15.0  # the standby waits out the whole lease ...
        assert stopped_after < takeover_after - 3  # ... so there were never two leaders
        # And b actually leads: its own caches, its own workers.
        await b.wait_for_log("controllers started", within=30)
    finally:
        poller.cancel()
        proxy_a.resume()
        await proxy_a.close()
        await proxy_b.close()


async def steal(client: ApiClient, namespace: str, seconds: int) -> None:
    """Another holder written into the Lease (retried: the leader renews it every second)."""
    while True:
        lease = await client.get(LEASES, DEFAULT_LEASE_NAME, namespace)
        now = format_micro_time(datetime.now(UTC))
        lease["spec"].update(
            holderIdentity="thief", renewTime=now, acquireTime=now, leaseDurationSeconds=seconds
        )
        with contextlib.suppress(Conflict):
            await client.replace(LEASES, lease)
            return


def model(name: str, source: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Model", "metadata": {"name": name}, "spec": {"source": source}}


async def model_status(client: ApiClient, namespace: str, name: str) -> dict[str, Any]:
    path = f"/apis/{API}/namespaces/{namespace}/models/{name}"
    return dict((await client.request("GET", path)).get("status") or {})


async def test_a_leader_that_finds_another_holder_stops_at_once_and_nobody_writes_meanwhile(
    api_cluster: ClusterHandle,
    crds: None,
    client: ApiClient,
    namespace: str,
    tmp_path: Path,
    processes: list[ControllerProcess],
) -> None:
    cache = tmp_path / "cache"
    args = controller_args(api_cluster.kubeconfig, namespace, cache, *FAST)
    a = await ControllerProcess("leader-a", args).start()
    processes.append(a)
    await a.wait_for_log("controllers started", within=60)
    b = await ControllerProcess("standby-b", args).start()
    processes.append(b)
    await b.wait_for_log("attempting to acquire leader lease", within=60)

    thief_seconds = 8
    stolen_at = time.monotonic()
    stolen_wall = datetime.now(UTC)
    await steal(client, namespace, thief_seconds)
    lost = await a.wait_for_log("another candidate holds the leader lease", within=10)
    noticed_after = (ControllerProcess.time_of(lost) - stolen_wall).total_seconds()
    assert noticed_after < 1.0 + 1.0  # at its next renewal (1 s retry period), not at its 3 s deadline
    assert await a.wait_exit(within=15) == 1, a.tail()

    # Nobody may act on this Model until the thief's lease has run out (by b's clock).
    source = tmp_path / "weights" / "tiny.gguf"
    make_sparse(source, 1000)
    path = f"/apis/{API}/namespaces/{namespace}/models"
    await client.request("POST", path, body=model("tiny", str(source)))
    while time.monotonic() - stolen_at < thief_seconds - 1:
        assert await model_status(client, namespace, "tiny") == {}
        assert not b.logged("acquired leader lease")
        await asyncio.sleep(0.2)
    await b.wait_for_log("acquired leader lease", within=20)
    await phase_reached(client, namespace, "tiny", "Ready", within=30)
    assert not a.logged("status written")  # the old leader never touched it


ONE_GIB = 1024**3


def zeros_sha256(size: int) -> str:
    digest = hashlib.sha256()
    chunk = bytes(8 * 1024 * 1024)
    for _ in range(size // len(chunk)):
        digest.update(chunk)
    return digest.hexdigest()


async def test_sigterm_during_a_model_copy_exits_promptly_and_the_next_leader_copies_afresh(
    api_cluster: ClusterHandle,
    crds: None,
    client: ApiClient,
    namespace: str,
    tmp_path: Path,
    processes: list[ControllerProcess],
) -> None:
    source = tmp_path / "weights" / "big.gguf"
    make_sparse(source, ONE_GIB)
    cache = tmp_path / "cache"
    model_dir = cache / hashlib.sha256(str(source).encode()).hexdigest()[:16]
    throttled = f"--model-copy-bytes-per-second={32 * 1024 * 1024}"  # 32 s for the whole file
    a = await ControllerProcess(
        "leader-a", controller_args(api_cluster.kubeconfig, namespace, cache, *FAST, throttled)
    ).start()
    processes.append(a)
    await a.wait_for_log("controllers started", within=60)
    b = await ControllerProcess(
        "standby-b", controller_args(api_cluster.kubeconfig, namespace, cache, *FAST)
    ).start()
    processes.append(b)
    await b.wait_for_log("attempting to acquire leader lease", within=60)

    path = f"/apis/{API}/namespaces/{namespace}/models"
    await client.request("POST", path, body=model("big", str(source)))

    def partial() -> list[Path]:
        return sorted(model_dir.glob(".model-*.tmp")) if model_dir.is_dir() else []

    await until(lambda: partial() and file_size(partial()[0]) > 64 * 1024 * 1024, 30, "a copying")
    (copying,) = partial()
    signalled = time.monotonic()
    a.send(signal.SIGTERM)
    assert await a.wait_exit(within=60) == 0, a.tail()
    exited_after = time.monotonic() - signalled
    print(f"\nSIGTERM during a copy: exited after {exited_after:.1f}s")
    assert exited_after < 10  # not after the copy (~30 s more), and within the 30 s grace period
    # a's partial file is gone. (Not "the directory is empty": a released its lease on the way out,
    # and b, retrying every second, may take it and start its own copy before this line.)
    assert not copying.exists()

    await b.wait_for_log("acquired leader lease", within=20)
    status = await phase_reached(client, namespace, "big", "Ready", within=120)
    cached = Path(status["path"])
    assert file_size(cached) == ONE_GIB
    assert status["sha256"] == zeros_sha256(ONE_GIB)  # a whole copy, from scratch
    assert [p.name for p in model_dir.iterdir()] == [cached.name]
    assert os.path.dirname(cached) == str(model_dir)
