"""The controller as a real OS process: JSON-line logs, SIGTERM -> graceful shutdown, lease released."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from kube_it_helpers import eventually, eventually_async

from llmkube.kube.errors import NotFound
from llmkube.kube.resource import CONFIG_MAPS, LEASES
from llmkube.kube.rest import ApiClient
from llmkube.manager import DEFAULT_LEASE_NAME

pytestmark = pytest.mark.integration

RUNNER = Path(__file__).parent / "kube_it_run_mirror.py"


async def test_sigterm_drains_releases_the_lease_and_exits_cleanly(
    client: ApiClient, api_cluster: Any, namespace: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(RUNNER), str(api_cluster.kubeconfig), namespace,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:

        async def lease_held() -> bool:
            try:
                lease = await client.get(LEASES, DEFAULT_LEASE_NAME, namespace)
            except NotFound:
                return False
            return bool(lease["spec"].get("holderIdentity"))

        async def mirrored() -> bool:
            try:
                return (await client.get(CONFIG_MAPS, "s-mirror", namespace)).get("data") == {"a": "b"}
            except NotFound:
                return False

        await eventually_async(lease_held)
        source = {"name": "s", "namespace": namespace, "labels": {"mirror": "yes"}}
        await client.create(
            CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": source, "data": {"a": "b"}}
        )
        await eventually_async(mirrored)

        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
        elapsed = time.monotonic() - started
        assert process.returncode == 0
        assert elapsed < 10  # nothing in flight: well within the 30 s grace period
        released = await client.get(LEASES, DEFAULT_LEASE_NAME, namespace)
        assert released["spec"]["holderIdentity"] == ""  # handed back, not left to expire
        assert released["spec"]["leaseDurationSeconds"] == 1

        records = [orjson.loads(line) for line in stderr.splitlines() if line.startswith(b"{")]
        events = [record["msg"] for record in records]
        assert "signal received: shutting down gracefully" in events
        assert "released leader lease" in events
        assert events[-1] == "stopped"
        assert all({"ts", "level", "msg"} <= set(record) for record in records)
        assert any(record.get("controller") == "configmap-mirror" for record in records)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    await eventually(lambda: process.returncode is not None)
