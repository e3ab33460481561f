"""`llmkube router` as a process against the real API server: it loads its ModelRouter from a
watch, follows spec changes and EndpointSlice changes without a restart, and routes real requests
to real OpenAI-compatible servers at the addresses the slices name."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from llmkube_testing.cluster import free_port
from llmkube_testing.openai_upstream import Upstream
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import KubeRest

from llmkube.api import constants as c
from llmkube.api.crds import all_crds
from llmkube.router.process import RouterProcess, RouterSettings

CHAT = "/v1/chat/completions"


def _outbound_address() -> str | None:
    """An address of this machine that is not loopback: the API server refuses loopback
    addresses in EndpointSlices, and pods are never there."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a source address
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def _router(name: str, default_route: str) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.ROUTER_KIND,
        "metadata": {"name": name},
        "spec": {
            "backends": [
                {"name": "small", "inferenceServiceRef": {"name": "small"}},
                {"name": "large", "inferenceServiceRef": {"name": "large"}},
            ],
            "rules": [{"name": "tiny", "match": {"models": ["tiny-*"]}, "route": {"backends": ["small"]}}],
            "defaultRoute": default_route,
        },
    }


def _slice(service: str, address: str, port: int, *, ready: bool = True, suffix: str = "a") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-{suffix}", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": ready}}],
    }


async def _eventually(check: Callable[[], Any], within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError("not reached in time")
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def _running(settings: RouterSettings) -> AsyncIterator[RouterProcess]:
    process = RouterProcess(settings)
    task = asyncio.get_running_loop().create_task(process.run())
    try:
        await asyncio.wait_for(process.started.wait(), 30)
        yield process
    finally:
        process.request_stop()
        await asyncio.wait_for(task, 30)


async def test_the_router_follows_its_model_router_and_endpoint_slices(
    api_cluster: ClusterHandle, namespace: str
) -> None:
    address = _outbound_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    apply_manifests(api_cluster, all_crds())
    admin: KubeRest = api_cluster.admin()
    small_a = await Upstream(name="small-a", host=address).start()
    small_b = await Upstream(name="small-b", host=address).start()
    large = await Upstream(name="large", host=address).start()
    try:
        await asyncio.to_thread(admin.create, _router("front", "large"), namespace=namespace)
        await asyncio.to_thread(admin.create, _slice("small", address, small_a.port), namespace=namespace)
        await asyncio.to_thread(admin.create, _slice("large", address, large.port), namespace=namespace)
        settings = RouterSettings(
            name="front",
            namespace=namespace,
            kubeconfig=str(api_cluster.kubeconfig),
            host="127.0.0.1",
            port=0,
            drain_delay=0.0,
            shutdown_grace=5.0,
            handle_signals=False,
        )
        async with _running(settings) as process, aiohttp.ClientSession() as session:
            assert process.address is not None
            url = f"http://127.0.0.1:{process.address[1]}"

            async def ready() -> bool:
                async with session.get(url + "/readyz") as answer:
                    return answer.status == 200

            async def served_by(model: str) -> str:
                body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                async with session.post(url + CHAT, json=body) as answer:
                    await answer.read()
                    return answer.headers.get("X-Upstream", str(answer.status))

            await _eventually(ready)
            assert await served_by("tiny-1") == "small-a"
            assert await served_by("other") == "large"

            # A new spec takes effect without a restart.
            patched = _router("front", "small")
            await asyncio.to_thread(admin.apply, patched, namespace=namespace)

            async def default_is_small() -> bool:
                return (await served_by("other")).startswith("small")

            await _eventually(default_is_small)

            # The pod of small-a stops being ready and small-b's appears: traffic follows the slices.
            await asyncio.to_thread(
                admin.apply, _slice("small", address, small_a.port, ready=False), namespace=namespace
            )
            await asyncio.to_thread(
                admin.create, _slice("small", address, small_b.port, suffix="b"), namespace=namespace
            )

            async def moved() -> bool:
                return await served_by("tiny-1") == "small-b"

            await _eventually(moved)
            before = small_a.requests
            for _ in range(10):
                assert await served_by("tiny-1") == "small-b"
            assert small_a.requests == before

            # The ModelRouter is deleted: nothing is routed, and /readyz says why.
            await asyncio.to_thread(admin.delete, c.API_VERSION, c.ROUTER_KIND, "front", namespace)

            async def refused() -> bool:
                return await served_by("tiny-1") == "503"

            await _eventually(refused)
            async with session.get(url + "/readyz") as answer:
                assert answer.status == 503 and "deleted" in await answer.text()
    finally:
        for upstream in (small_a, small_b, large):
            await upstream.stop()


async def test_sigterm_lets_a_stream_in_flight_finish_and_then_refuses_new_connections(
    api_cluster: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    """`llmkube router` as its own process, stopped with a real SIGTERM while a stream is relayed:
    /readyz fails at once (the Service stops sending it connections), requests are still answered
    for the drain delay, then the port is closed while the stream goes on to its last event, and
    the process exits 0 once it has ended."""
    address = _outbound_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    apply_manifests(api_cluster, all_crds())
    admin: KubeRest = api_cluster.admin()
    # 100 events 50 ms apart: a stream of about 5 s, longer than the drain delay (2 s).
    backend = await Upstream(name="large", host=address, tokens=100, interval=0.05).start()
    port = free_port()
    router: asyncio.subprocess.Process | None = None
    try:
        await asyncio.to_thread(admin.create, _router("drained", "large"), namespace=namespace)
        await asyncio.to_thread(admin.create, _slice("large", address, backend.port), namespace=namespace)
        router = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "llmkube.cli", "router", "--model-router", "drained",
            "--namespace", namespace, "--kubeconfig", str(api_cluster.kubeconfig),
            "--listen", f"127.0.0.1:{port}", "--shutdown-grace", "20", "--log-format", "json",
            stdout=asyncio.subprocess.DEVNULL, stderr=(tmp_path / "router.log").open("wb"),
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:

            async def readyz() -> int:
                try:
                    async with session.get(url + "/readyz") as answer:
                        return answer.status
                except aiohttp.ClientConnectorError:
                    return 0

            async def ready() -> bool:
                return await readyz() == 200

            await _eventually(ready, within=60)
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
            async with session.post(url + CHAT, json=body) as stream:
                assert stream.status == 200 and stream.headers["X-Upstream"] == "large"
                received = await stream.content.readany()
                assert received.startswith(b"data: ")
                router.send_signal(signal.SIGTERM)

                async def not_ready() -> bool:
                    return await readyz() == 503

                await _eventually(not_ready, within=5)
                # Fresh connections (the Service's last ones) are still served during the drain delay.
                async with aiohttp.ClientSession() as fresh:
                    plain = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
                    async with fresh.post(url + CHAT, json=plain) as answer:
                        assert answer.status == 200

                async def refused() -> bool:
                    async with aiohttp.ClientSession() as fresh:
                        try:
                            async with fresh.get(url + "/healthz") as answer:
                                await answer.read()
                                return False
                        except aiohttp.ClientConnectorError:
                            return True

                await _eventually(refused, within=10)
                assert router.returncode is None  # still relaying the stream
                async for chunk in stream.content.iter_any():
                    received += chunk
            events = [e for e in received.split(b"\n\n") if e.startswith(b"data: ")]
            assert events[-1] == b"data: [DONE]"
            contents = [e for e in events if b'"content"' in e]
            assert len(contents) == 100, len(contents)
        assert await asyncio.wait_for(router.wait(), 30) == 0, (tmp_path / "router.log").read_text()
        assert backend.cancelled == 0
    finally:
        if router is not None and router.returncode is None:
            router.kill()
            await router.wait()
        await backend.stop()
