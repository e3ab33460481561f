"""The Event recorder against a real kube-apiserver that stops answering (a stalled TCP relay in
front of it): the backlog stays bounded, the oldest writes are dropped and counted, and the newest
are written once the server answers again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kube_it_helpers import eventually
from llmkube_testing.tcpproxy import TcpProxy, kubeconfig_through
from prometheus_client import REGISTRY

from llmkube.kube.events.recorder import WARNING, EventRecorder
from llmkube.kube.events.series import SeriesCache
from llmkube.kube.resource import EVENTS
from llmkube.kube.rest import ApiClient, RequestTimeout, load_client_config

pytestmark = pytest.mark.integration


def dropped() -> float:
    return REGISTRY.get_sample_value("llmkube_events_dropped_total", {"reason": "queue_full"}) or 0.0


def regarding(namespace: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{index}", "namespace": namespace, "uid": f"uid-{namespace}-{index}"},
    }


async def test_a_silent_api_server_bounds_the_backlog_and_the_newest_events_get_written(
    client: ApiClient, api_cluster: Any, namespace: str, tmp_path: Path
) -> None:
    server = urlsplit(api_cluster.server)
    proxy = await TcpProxy.start(server.hostname or "127.0.0.1", server.port or 443)
    config = await load_client_config(
        kubeconfig_through(proxy, api_cluster.kubeconfig, tmp_path / "kubeconfig")
    )
    via_proxy = ApiClient.from_config(config, request_timeout=RequestTimeout(total=2.0, connect=1.0))
    recorder = EventRecorder(
        via_proxy,
        reporting_controller="thing-controller",
        backlog_limit=10,
        series=SeriesCache(refresh=0.5),
    )
    recorder.start()
    try:
        proxy.stall()  # the server stops answering: every write now waits for its timeout
        before = dropped()
        largest = 0
        # Warnings keep repeating during the outage, and the heartbeat keeps refreshing their series:
        # one create and one refresh per series wait, however many heartbeats pass.
        for _ in range(15):
            for index in range(100, 105):
                recorder.event(regarding(namespace, index), WARNING, "BackOff", "still failing")
            await asyncio.sleep(0.2)
            largest = max(largest, recorder.pending)
        assert largest <= 10
        assert dropped() == before
        # New Events: 25 of them into 10 places; the oldest writes make room.
        for index in range(25):
            recorder.event(regarding(namespace, index), "Normal", "Created", f"object {index}")
            largest = max(largest, recorder.pending)
        assert largest == recorder.pending == 10
        assert dropped() - before >= 15

        proxy.resume()
        await eventually(lambda: recorder.pending == 0, within=30)
        await recorder.stop(grace=5)

        async def written() -> set[str]:
            events = await client.list_all(EVENTS, namespace)
            return {event["regarding"]["name"] for event in events if event["reason"] == "Created"}

        assert await written() == {f"cm-{index}" for index in range(15, 25)}  # the newest, only
    finally:
        await recorder.stop(grace=0)
        await via_proxy.close()
        await proxy.close()
