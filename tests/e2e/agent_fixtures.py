"""The host agent tests' fixtures (tests/e2e/test_agent*.py import them): the node tier's
llama-server for this host, an address to advertise, the agent's identity, the tiny GGUF over HTTP,
and `start_agent`, which starts agents (fetching hf:// files from conftest's Hub stand-in, `hf_hub`)
and stops them and their servers after the test."""

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from agent_support import (
    AgentProcess,
    ModelFiles,
    advertise_address,
    agent_args,
    agent_kubeconfig,
    llama_server_binary,
    model_files,
    server_pids,
)
from e2e_support import RunningController
from llmkube_testing.hfhub import HubState

AGENT_EVENTS = "llmkube-agent"


@pytest.fixture(scope="module")
def binary() -> Path:
    return llama_server_binary()


@pytest.fixture(scope="module")
def address() -> str:
    return advertise_address()


@pytest.fixture(scope="module")
def identity(operator: RunningController, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agent_kubeconfig(operator.cluster, tmp_path_factory.mktemp("agent") / "agent.kubeconfig")


@pytest.fixture
def files(tmp_path: Path) -> Iterator[ModelFiles]:
    with model_files(tmp_path / "files") as served_files:
        yield served_files


@pytest.fixture
async def start_agent(
    identity: Path, binary: Path, address: str, full_namespace: str, tmp_path: Path, hf_hub: HubState
) -> AsyncIterator[object]:
    """Starts agents (on this test's state and cache directories); stops them and every server
    they left behind at the end, and checks that none was refused a request: by its RBAC (403), or
    by the admission policy on its EndpointSlices (403; 422 while the controller's list of metal
    Services does not exist), which it must never provoke: it waits for the list."""
    started: list[AgentProcess] = []

    async def start(*extra: str, name: str = "host-a", selector: str = "") -> AgentProcess:
        process = AgentProcess(
            agent_args(
                identity,
                name=name,
                address=address,
                llama_server=binary,
                state=tmp_path / name / "state",
                cache=tmp_path / name / "cache",
                namespace=full_namespace,
                selector=selector,
                extra=(f"--hf-endpoint={hf_hub.base}", *(extra or ("--heartbeat-interval=5",))),
            )
        )
        started.append(process)
        return await process.start()

    yield start
    refused = 0.0
    for process in started:
        if process.process is not None and process.process.returncode is None:
            refused += process.sample("rest_client_requests_total", code="403")
            refused += process.sample("rest_client_requests_total", code="422")
            await process.stop()
        print(process.tail(100))
    for pid in server_pids(binary, tmp_path):  # servers an agent leaves running by design
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert refused == 0, (
        "the agent was refused a request: its RBAC (manifests/agent/) or the admission policy on its slices"
    )


def agent_reasons(admin: object, namespace: str) -> set[str]:
    events = admin.list("events.k8s.io/v1", "Event", namespace)  # type: ignore[attr-defined]
    return {e["reason"] for e in events if e.get("reportingController") == AGENT_EVENTS}
