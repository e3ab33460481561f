"""The host agent under faults, end to end on the full tier (the real agent process, the real
llama-server, the session's controller): the API server unreachable, a model llama-server refuses,
its port taken, the model cache full. Each is said in the service's status, in an Event and in the
agent's log; the agent never loops on it (its retries are counted over a window that ends at a
positive event); and once the fault is gone the service serves, with nothing lost."""

import contextlib
import itertools
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from agent_fixtures import agent_reasons
from agent_support import (
    AgentProcess,
    ModelFiles,
    agent_slices,
    chat,
    metal_isvc,
    metal_model,
    served,
    server_key,
    status,
)
from e2e_support import API, RunningController, conditions, eventually, patch
from llmkube_testing.tcpproxy import TcpProxy, kubeconfig_through

from llmkube.plan.inferenceservice.metal import (
    CRASH_LOOP_BACK_OFF,
    MODEL_FETCH_FAILED,
    NO_FREE_PORT,
    parse_heartbeat,
)

pytestmark = [pytest.mark.e2e, pytest.mark.node_prereqs]  # llama-server, from the node tier's image

HEARTBEAT = "llmkube.ai/agent-heartbeat"


def failed_with(admin: Any, name: str, namespace: str, reason: str) -> dict[str, Any] | None:
    """The condition that carries `reason`, once the service is Failed with it."""
    current = status(admin, name, namespace)
    found = [c for c in conditions(current).values() if c.get("reason") == reason]
    return found[0] if current.get("phase") == "Failed" and found else None


def heartbeat(admin: Any, namespace: str) -> datetime | None:
    (registered,) = agent_slices(admin, namespace, "host-a")
    return parse_heartbeat(registered["metadata"]["annotations"][HEARTBEAT])


async def test_the_api_server_unreachable_the_agent_keeps_serving_and_its_heartbeat_resumes(
    operator: RunningController,
    start_agent: object,
    files: ModelFiles,
    full_namespace: str,
    identity: Path,
    tmp_path: Path,
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    server = urlsplit(admin.server)
    relay = await TcpProxy.start(server.hostname or "127.0.0.1", server.port or 443)
    through = kubeconfig_through(relay, identity, tmp_path / "through-relay.kubeconfig")
    try:
        agent: AgentProcess = await start_agent(  # type: ignore[operator]
            "--heartbeat-interval=2", f"--kubeconfig={through}"
        )
        admin.create(metal_model("tiny", files.url()), namespace=ns)
        admin.create(metal_isvc("chat", "tiny"), namespace=ns)
        address, port = await served(admin, ns, "chat")
        secret = server_key(admin, ns, "chat")

        await relay.refuse()
        down = time.monotonic()
        # Positive events first: the agent tried and failed (its client counts an "<error>"), and
        # tried again over at least two heartbeat intervals...
        await eventually(
            lambda: agent.sample("rest_client_requests_total", code="<error>") >= 1, what="a failed request"
        )
        failed_at_first = agent.sample("rest_client_requests_total", code="<error>")
        await eventually(
            lambda: agent.logged("reconcile failed") and time.monotonic() - down >= 10,
            what="a failed heartbeat and 10 s of outage",
        )
        # ... all the while serving, and without a loop: a few attempts a second at most.
        assert chat(address, port, secret)["object"] == "chat.completion"
        assert agent.sample("llmkube_agent_processes", phase="serving") == 1
        attempts = agent.sample("rest_client_requests_total", code="<error>") - failed_at_first
        outage = time.monotonic() - down
        print(f"agent: {attempts:.0f} failed requests in {outage:.1f} s of API server outage")
        assert attempts < 5 * outage, f"{attempts} failed requests in {outage:.1f} s: a hot loop"
        logged = agent.logged("reconcile failed")[-1]
        assert logged["name"] == "chat" and logged["error"]

        await relay.accept()
        back = datetime.now(UTC).replace(microsecond=0)
        await eventually(
            lambda: (beat := heartbeat(admin, ns)) is not None and beat > back,
            within=30,
            what="a heartbeat after the API server came back",
        )
        current = status(admin, "chat", ns)
        assert current["phase"] == "Ready" and current["readyReplicas"] == 1
        assert chat(address, port, secret)["object"] == "chat.completion"
    finally:
        await relay.close()


def truncated_model(files: ModelFiles) -> str:
    """The tiny GGUF cut short in its tensor data: its header reads (the agent sizes it), llama-server
    refuses to load it."""
    data = (files.directory / "tiny.gguf").read_bytes()
    (files.directory / "truncated.gguf").write_bytes(data[: len(data) * 3 // 5])
    return files.url("truncated.gguf")


async def test_a_model_llama_server_refuses_backs_off_says_why_and_recovers_when_fixed(
    operator: RunningController, start_agent: object, files: ModelFiles, full_namespace: str
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    agent: AgentProcess = await start_agent()  # type: ignore[operator]
    admin.create(metal_model("tiny", truncated_model(files)), namespace=ns)
    admin.create(metal_isvc("chat", "tiny"), namespace=ns)

    condition = await eventually(
        lambda: failed_with(admin, "chat", ns, CRASH_LOOP_BACK_OFF), what="CrashLoopBackOff"
    )
    # What llama-server said when it refused the file is in the message.
    assert "llama-server exited with code" in condition["message"], condition
    assert "its last output:" in condition["message"], condition
    assert "BackOff" in agent_reasons(admin, ns)
    assert agent.logged("server exited", service=f"{ns}/chat")
    # Backing off, not looping: wait for the fourth start, then look at the gaps between them.
    await eventually(lambda: len(agent.logged("server started", service=f"{ns}/chat")) >= 4, within=60)
    starts = [_seconds(r["ts"]) for r in agent.logged("server started", service=f"{ns}/chat")]
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    print(f"agent: gaps between the starts of a refused model: {', '.join(f'{g:.1f}' for g in gaps)} s")
    assert gaps[1] >= 4.5 and gaps[2] >= 9, gaps  # at once, then 5 s, then 10 s
    assert len(agent.logged("endpoint slice written", service=f"{ns}/chat")) < 3 * len(starts) + 3

    # The Model fixed (pointed at the whole file): the service serves.
    patch(admin, API, "Model", "tiny", ns, {"spec": {"source": files.url()}})
    address, port = await served(admin, ns, "chat")
    secret = server_key(admin, ns, "chat")
    assert chat(address, port, secret)["object"] == "chat.completion"


def _seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


async def test_a_port_already_taken_is_reported_retried_slowly_and_served_once_free(
    operator: RunningController, start_agent: object, files: ModelFiles, full_namespace: str, address: str
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    squatter = socket.create_server((address, 0))
    port = squatter.getsockname()[1]
    try:
        agent: AgentProcess = await start_agent(  # type: ignore[operator]
            "--heartbeat-interval=5", f"--server-ports={port}-{port}"
        )
        admin.create(metal_model("tiny", files.url()), namespace=ns)
        admin.create(metal_isvc("chat", "tiny"), namespace=ns)
        condition = await eventually(lambda: failed_with(admin, "chat", ns, NO_FREE_PORT), what="NoFreePort")
        assert f"no free port on {address} in {port}-{port}" in condition["message"]
        assert NO_FREE_PORT in agent_reasons(admin, ns)
        # Retried every 10 s, not in a loop: the second attempt, then the gap.
        await eventually(lambda: len(agent.logged("no free port for a server")) >= 2, within=30)
        tries = [_seconds(r["ts"]) for r in agent.logged("no free port for a server")]
        assert tries[1] - tries[0] >= 9.5, tries
    finally:
        squatter.close()
    served_address, served_port = await served(admin, ns, "chat", within=30)
    secret = server_key(admin, ns, "chat")
    assert served_port == port
    assert chat(served_address, served_port, secret)["object"] == "chat.completion"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only): a model cache without room for the tiny model and its margin."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs for the full-disk case: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        with contextlib.suppress(OSError):
            subprocess.run(["umount", "-l", str(mount_point)], check=False)


def bytes_in(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def grow(mount_point: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mount_point)], check=True)


async def test_a_full_model_cache_is_reported_before_a_byte_is_written_and_retried_later(
    operator: RunningController,
    start_agent: object,
    files: ModelFiles,
    full_namespace: str,
    small_disk: Path,
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    agent: AgentProcess = await start_agent(  # type: ignore[operator]
        "--heartbeat-interval=5", f"--model-cache-dir={small_disk}"
    )
    admin.create(metal_model("tiny", files.url()), namespace=ns)
    admin.create(metal_isvc("chat", "tiny"), namespace=ns)
    condition = await eventually(
        lambda: failed_with(admin, "chat", ns, MODEL_FETCH_FAILED), what="ModelFetchFailed"
    )
    assert f"the model cache {small_disk} has 1.0 MiB free" in condition["message"]
    assert MODEL_FETCH_FAILED in agent_reasons(admin, ns)
    (failure,) = agent.logged("model fetch failed")
    assert failure["retry_in"] == 30
    assert bytes_in(small_disk) == 0  # not a byte written

    # Room made: the next attempt (30 s after the first) fetches it and the service serves.
    grow(small_disk, "80m")
    address, port = await served(admin, ns, "chat", within=60)
    secret = server_key(admin, ns, "chat")
    assert chat(address, port, secret)["object"] == "chat.completion"
    assert len(agent.logged("model fetch failed")) == 1
