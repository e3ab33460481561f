"""The host agent (`llmkube agent`) end to end on the full tier: a real agent process under its own
least-privilege identity (manifests/agent/rbac.yaml, nothing else), the real llama-server run
natively on this machine serving the tiny GGUF, and the session's controller turning what the agent
registers into status, under the admission policy that holds the agent to the slices of the metal
Services the controller lists (installed for the session: tests/e2e/conftest.py). The completions go
to the address and port the agent registered (the node tier routes a ClusterIP there; this tier has
no kube-proxy)."""

import asyncio
import hashlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from agent_fixtures import agent_reasons
from agent_support import (
    AgentProcess,
    ModelFiles,
    agent_slices,
    chat,
    command_line,
    metal_isvc,
    metal_model,
    served,
    served_endpoint,
    server_key,
    server_pids,
    status,
    wait_pids,
)
from e2e_support import API, RunningController, conditions, eventually, patch, poll
from llmkube_testing.controller_harness import controller_running, reconcile_log
from llmkube_testing.hfhub import HubState
from llmkube_testing.rest import KubeRest, RestError, load_yaml_documents
from llmkube_testing.tiny_gguf import write_tiny_gguf

from llmkube.plan.inferenceservice.metal import UNSUPPORTED_BY_AGENT
from llmkube.plan.inferenceservice.metal_services import METAL_SERVICES_CONFIGMAP
from llmkube.plan.model.source import cache_key

pytestmark = [pytest.mark.e2e, pytest.mark.node_prereqs]  # llama-server, from the node tier's image

ROOT = Path(__file__).resolve().parents[2]


async def test_a_metal_service_is_served_by_the_agent_and_removed_with_it(
    operator: RunningController, start_agent: object, files: ModelFiles, full_namespace: str, binary: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    agent: AgentProcess = await start_agent()  # type: ignore[operator]
    sha = hashlib.sha256((files.directory / "tiny.gguf").read_bytes()).hexdigest()
    applied = time.monotonic()
    admin.create(metal_model("tiny", files.url(), sha256=sha), namespace=ns)
    admin.create(metal_isvc("chat", "tiny", parallelSlots=1), namespace=ns)

    address, port = await served(admin, ns, "chat")
    secret = server_key(admin, ns, "chat")
    answer = chat(address, port, secret)
    first_completion = time.monotonic() - applied
    assert answer["object"] == "chat.completion" and answer["usage"]["completion_tokens"] > 0
    print(f"agent timing: apply -> first completion through the agent {first_completion:.1f} s")

    (registered,) = agent_slices(admin, ns, "host-a")
    meta = registered["metadata"]
    assert meta["name"] == "chat-host-a"
    assert meta["labels"]["kubernetes.io/service-name"] == "chat"
    assert meta["labels"]["endpointslice.kubernetes.io/managed-by"] == "agent.llmkube.ai"
    assert [(o["kind"], o["name"]) for o in meta["ownerReferences"]] == [("Service", "chat")]
    assert meta["annotations"]["llmkube.ai/agent-heartbeat"].endswith("Z")
    assert "llmkube.ai/agent-reason" not in meta["annotations"]
    assert registered["endpoints"] == [
        {"addresses": [address], "conditions": {"ready": True, "serving": True, "terminating": False}}
    ]
    assert "selector" not in admin.get("v1", "Service", "chat", ns)["spec"]
    current = status(admin, "chat", ns)
    assert (current["readyReplicas"], current["replicas"]) == (1, 1)
    assert conditions(current)["Available"]["status"] == "True"

    # The controller's own command line, on the agent's address and port, with the file it fetched
    # (checked against the Model's sha256) from its cache.
    (pid,) = wait_pids(binary, agent.cache_dir, 1)
    command = command_line(pid)
    model_path = agent.cache_dir / cache_key(files.url()) / "tiny.gguf"
    assert command[1:7] == ["--model", str(model_path), "--host", address, "--port", str(port)]
    assert hashlib.sha256(model_path.read_bytes()).hexdigest() == sha
    assert {"--ctx-size", "--metrics"} <= set(command)
    assert command[command.index("--ctx-size") + 1] == "256"
    await eventually(lambda: "ServerReady" in agent_reasons(admin, ns), what="the agent's ServerReady Event")
    assert agent.sample("llmkube_agent_processes", phase="serving") == 1
    rss = agent.rss()
    print(f"agent RSS with one model served: {rss / 2**20:.1f} MiB")

    # Deleted: its server stops and its slice goes.
    admin.delete(API, "InferenceService", "chat", ns)
    await eventually(lambda: not agent_slices(admin, ns, "host-a"), what="the slice removed")
    await asyncio.get_running_loop().run_in_executor(None, lambda: wait_pids(binary, agent.cache_dir, 0))
    await eventually(lambda: agent.sample("llmkube_agent_processes") == 0, what="no process left")


async def test_a_hugging_face_model_s_files_are_downloaded_by_the_agent_and_served_without_hf(
    operator: RunningController,
    start_agent: object,
    hf_hub: HubState,
    full_namespace: str,
    binary: Path,
    tmp_path: Path,
) -> None:
    """The agent fetches the file the Model lists from the Hub (the session's stand-in, through its
    LFS redirect) and gives llama-server `--model` on it: llama-server never fetches from the Hub
    itself (no `-hf`). A repository without files says what to add instead of waiting."""
    admin, ns = operator.cluster.admin(), full_namespace
    agent: AgentProcess = await start_agent()  # type: ignore[operator]
    write_tiny_gguf(tmp_path / "tiny.gguf")
    data = (tmp_path / "tiny.gguf").read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    repo = f"llmkube-e2e/{ns}-GGUF"
    hf_hub.add(repo, {"Q4/tiny-q4.gguf": data, "README.md": b"# tiny\n"})
    source = f"hf://{repo}"
    admin.create(metal_model("tiny-hf", source, files=["Q4/tiny-q4.gguf"], sha256=sha), namespace=ns)
    admin.create(metal_isvc("chat", "tiny-hf", parallelSlots=1), namespace=ns)

    address, port = await served(admin, ns, "chat")
    assert chat(address, port, server_key(admin, ns, "chat"))["object"] == "chat.completion"
    (pid,) = wait_pids(binary, agent.cache_dir, 1)
    command = command_line(pid)
    model_path = agent.cache_dir / cache_key(source) / "files" / "Q4" / "tiny-q4.gguf"
    assert command[1:3] == ["--model", str(model_path)]
    assert not {"-hf", "--hf-repo", "-hfr", "--hf-file", "-hff"} & set(command), command
    assert hashlib.sha256(model_path.read_bytes()).hexdigest() == sha
    # Downloaded whole by the agent (the controller only sends HEADs and Range reads of the header),
    # the listed file only.
    downloads = [r.path for r in hf_hub.requests if r.method == "GET" and r.range is None and repo in r.path]
    assert downloads == [f"/{repo}/resolve/main/Q4/tiny-q4.gguf"], downloads
    assert agent.logged("model downloaded", source=source)

    admin.create(metal_model("whole", source), namespace=ns)
    admin.create(metal_isvc("whole", "whole"), namespace=ns)

    def unsupported() -> str | None:
        current = status(admin, "whole", ns)
        found = [c for c in conditions(current).values() if c.get("reason") == UNSUPPORTED_BY_AGENT]
        return found[0]["message"] if current.get("phase") == "Failed" and found else None

    message = await eventually(unsupported, what="a repository without files reported unsupported")
    assert f"names the Hugging Face repository {source} but no file" in message
    assert "Name the .gguf file in spec.files" in message
    assert server_pids(binary, agent.cache_dir) == [pid]  # nothing started for it


async def test_a_killed_server_is_withdrawn_restarted_and_serves_again(
    operator: RunningController, start_agent: object, files: ModelFiles, full_namespace: str, binary: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    agent: AgentProcess = await start_agent()  # type: ignore[operator]
    admin.create(metal_model("tiny", files.url()), namespace=ns)
    admin.create(metal_isvc("chat", "tiny"), namespace=ns)
    await served(admin, ns, "chat")
    (pid,) = wait_pids(binary, agent.cache_dir, 1)

    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    # Withdrawn: the agent wrote the endpoint not ready (or without a port) after the server exited.
    await eventually(
        lambda: (
            agent.logged("server exited", pid=pid)
            and any(
                not r.get("ready")
                for r in agent.logged("endpoint slice written", service=f"{ns}/chat")
                if r["ts"] > agent.logged("server exited", pid=pid)[0]["ts"]
            )
        ),
        what="the endpoint withdrawn",
    )
    address, port = await served(admin, ns, "chat")
    secret = server_key(admin, ns, "chat")
    (restarted,) = wait_pids(binary, agent.cache_dir, 1)
    assert restarted != pid
    answer = chat(address, port, secret)
    gap = time.monotonic() - killed
    assert answer["object"] == "chat.completion"
    print(f"agent timing: llama-server killed -> serving again (restart gap) {gap:.1f} s")
    assert agent.sample("llmkube_agent_process_restarts_total", namespace=ns, name="chat") == 1
    assert "BackOff" in agent_reasons(admin, ns)


async def test_a_restarted_agent_adopts_its_servers_and_writes_nothing(
    operator: RunningController, start_agent: object, files: ModelFiles, full_namespace: str, binary: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    # Heartbeats every 60 s: none falls due while the test looks at the second agent's writes.
    first: AgentProcess = await start_agent("--heartbeat-interval=60")  # type: ignore[operator]
    admin.create(metal_model("tiny", files.url()), namespace=ns)
    admin.create(metal_isvc("chat", "tiny"), namespace=ns)
    address, port = await served(admin, ns, "chat")
    secret = server_key(admin, ns, "chat")
    (pid,) = wait_pids(binary, first.cache_dir, 1)
    assert await first.stop() == 0  # leaves its servers running (no --stop-on-exit)
    assert server_pids(binary, first.cache_dir) == [pid]
    before = agent_slices(admin, ns, "host-a")[0]["metadata"]["resourceVersion"]

    second: AgentProcess = await start_agent("--heartbeat-interval=60")  # type: ignore[operator]
    await eventually(lambda: second.logged("server adopted", pid=pid), what="the server adopted")
    key = {"controller": "metal-agent"}
    await eventually(
        lambda: (
            second.sample("controller_runtime_reconcile_total", **key) >= 1
            and second.sample("llmkube_agent_processes", phase="serving") == 1
        ),
        what="the adopted server reconciled and probed",
    )
    assert server_pids(binary, first.cache_dir) == [pid], "a second copy of the model was loaded"
    assert second.writes() == 0
    assert agent_slices(admin, ns, "host-a")[0]["metadata"]["resourceVersion"] == before
    assert chat(address, port, secret)["object"] == "chat.completion"


async def test_the_reference_mlx_sample_applies_and_is_reported_unsupported(
    operator: RunningController, start_agent: object, full_namespace: str
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    await start_agent()  # type: ignore[operator]
    # (The other sample, inferenceservice_turboquant.yaml, downloads a 30 GB GGUF from the Hub: the
    # API server's acceptance of it is tested without an agent, its settings in the unit tests.)
    sample = ROOT / "manifests" / "samples" / "metal" / "inferenceservice_qwen3_4b_vllm_swift_turboquant.yaml"
    for doc in load_yaml_documents(sample):
        admin.create(doc, namespace=ns)

    def unsupported() -> str | None:
        current = status(admin, "qwen-tq", ns)
        reasons = {c.get("reason") for c in conditions(current).values()}
        return current.get("phase") if "UnsupportedByAgent" in reasons else None

    assert await eventually(unsupported, what="qwen-tq reported unsupported") == "Failed"
    message = " ".join(c.get("message", "") for c in conditions(status(admin, "qwen-tq", ns)).values())
    assert "mlx" in message
    assert "UnsupportedByAgent" in agent_reasons(admin, ns)


async def test_over_the_budget_the_lower_priority_service_is_evicted_and_says_so(
    operator: RunningController, start_agent: object, files: ModelFiles, full_namespace: str, binary: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    first: AgentProcess = await start_agent("--heartbeat-interval=5")  # type: ignore[operator]
    admin.create(metal_model("tiny", files.url()), namespace=ns)
    admin.create(metal_isvc("low", "tiny", priority="low"), namespace=ns)
    await served(admin, ns, "low")
    need = first.sample("llmkube_agent_memory_used_bytes")
    assert need > 0
    await first.stop()
    # Room for one server of the tiny model, not two; the agent adopts the one that runs.
    budget = f"--memory-budget={int(need * 1.5)}"
    second: AgentProcess = await start_agent("--heartbeat-interval=5", budget)  # type: ignore[operator]
    await eventually(lambda: second.logged("server adopted"), what="the low-priority server adopted")
    assert second.sample("llmkube_agent_memory_budget_bytes") == int(need * 1.5)

    admin.create(metal_isvc("high", "tiny", priority="high"), namespace=ns)
    address, port = await served(admin, ns, "high")
    secret = server_key(admin, ns, "high")
    assert chat(address, port, secret)["object"] == "chat.completion"

    def evicted() -> dict[str, str] | None:
        current = status(admin, "low", ns)
        found = [c for c in conditions(current).values() if c.get("reason") == "Evicted"]
        return found[0] if current.get("phase") == "Failed" and found else None

    condition = await eventually(evicted, what="low reported Evicted")
    assert f"to make room for {ns}/high" in condition["message"]
    assert "Evicted" in agent_reasons(admin, ns)
    assert second.sample("llmkube_agent_evictions_total", reason="priority") == 1
    assert len(wait_pids(binary, second.cache_dir, 1)) == 1


async def test_two_agents_share_a_cluster_by_service_selector(
    operator: RunningController, start_agent: object, files: ModelFiles, full_namespace: str, binary: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    host = "inference.llmkube.dev/host"
    a: AgentProcess = await start_agent(name="host-a", selector=f"{host}=a")  # type: ignore[operator]
    b: AgentProcess = await start_agent(name="host-b", selector=f"{host}=b")  # type: ignore[operator]
    admin.create(metal_model("tiny", files.url()), namespace=ns)
    for name, which in (("one", "a"), ("two", "a"), ("three", "a"), ("moving", "b")):
        admin.create(metal_isvc(name, "tiny", labels={host: which}), namespace=ns)
    for name in ("one", "two", "three", "moving"):
        await served(admin, ns, name)

    def services_of(agent: str) -> list[str]:
        return sorted(
            s["metadata"]["labels"]["kubernetes.io/service-name"] for s in agent_slices(admin, ns, agent)
        )

    assert services_of("host-a") == ["one", "three", "two"]
    assert services_of("host-b") == ["moving"]
    assert len(wait_pids(binary, a.cache_dir, 3)) == 3 and len(wait_pids(binary, b.cache_dir, 1)) == 1
    await eventually(
        lambda: a.sample("llmkube_agent_processes", phase="serving") == 3, what="a's three servers"
    )
    print(f"agent RSS with three models served: {a.rss() / 2**20:.1f} MiB")

    # Moved to the other host: host-b stops its server and withdraws its slice, host-a serves it.
    patch(admin, API, "InferenceService", "moving", ns, {"metadata": {"labels": {host: "a"}}})
    await eventually(lambda: services_of("host-b") == [], what="host-b's slice removed")
    await eventually(
        lambda: services_of("host-a") == ["moving", "one", "three", "two"], what="host-a serves it"
    )
    address, port = await served(admin, ns, "moving")
    secret = server_key(admin, ns, "moving")
    assert chat(address, port, secret)["object"] == "chat.completion"
    await asyncio.get_running_loop().run_in_executor(None, lambda: wait_pids(binary, b.cache_dir, 0))


async def test_a_context_size_change_rolls_in_place_without_a_failed_request(
    operator: RunningController, start_agent: object, files: ModelFiles, full_namespace: str, binary: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    agent: AgentProcess = await start_agent()  # type: ignore[operator]
    admin.create(metal_model("tiny", files.url()), namespace=ns)
    admin.create(metal_isvc("chat", "tiny"), namespace=ns)
    await served(admin, ns, "chat")
    secret = server_key(admin, ns, "chat")
    (old,) = wait_pids(binary, agent.cache_dir, 1)

    # A client that reads the registered endpoint before each request, as kube-proxy follows the slice.
    stop = threading.Event()
    answers: list[int] = []
    failures: list[str] = []

    def client() -> None:
        while not stop.is_set():
            endpoint = served_endpoint(admin, ns, "chat")
            if endpoint is None:
                failures.append("no ready endpoint")
                continue
            try:
                chat(*endpoint, secret, timeout=30)
                answers.append(endpoint[1])
            except OSError as error:
                failures.append(f"{endpoint}: {error}")

    loop = asyncio.get_running_loop()
    running = loop.run_in_executor(None, client)
    try:
        await eventually(lambda: len(answers) >= 3, what="the client served")
        patch(admin, API, "InferenceService", "chat", ns, {"spec": {"contextSize": 512}})

        def rolled() -> int | None:
            pids = server_pids(binary, agent.cache_dir)
            if old in pids or len(pids) != 1:
                return None
            return (
                pids[0]
                if command_line(pids[0])[command_line(pids[0]).index("--ctx-size") + 1] == "512"
                else None
            )

        new = await eventually(rolled, within=90, what="the new server serving and the old one stopped")
        first_new_port = len(answers)
        await eventually(lambda: len(answers) >= first_new_port + 3, what="the client served by the new one")
    finally:
        stop.set()
        await running
    assert failures == []
    assert new != old and len(set(answers)) == 2  # served by the old port, then by the new one
    assert "RolledOut" in agent_reasons(admin, ns)
    assert status(admin, "chat", ns)["phase"] == "Ready"


async def test_an_agent_told_to_stop_its_servers_on_exit_leaves_nothing_running(
    operator: RunningController, start_agent: object, files: ModelFiles, full_namespace: str, binary: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    agent: AgentProcess = await start_agent("--heartbeat-interval=5", "--stop-on-exit")  # type: ignore[operator]
    admin.create(metal_model("tiny", files.url()), namespace=ns)
    admin.create(metal_isvc("chat", "tiny"), namespace=ns)
    await served(admin, ns, "chat")
    (pid,) = wait_pids(binary, agent.cache_dir, 1)

    assert await agent.stop() == 0
    assert server_pids(binary, agent.cache_dir) == [], agent.tail(30)
    assert [r["pid"] for r in agent.logged("server started")] == [pid], agent.tail(30)
    assert agent_slices(admin, ns, "host-a") == []


SYSTEM = "llmkube-system"


def metal_services(admin: KubeRest) -> dict[str, str]:
    listing = admin.get_or_none("v1", "ConfigMap", METAL_SERVICES_CONFIGMAP, SYSTEM) or {}
    return dict(listing.get("data") or {})


async def test_under_the_admission_policy_the_agent_serves_its_service_and_no_other(
    operator: RunningController,
    start_agent: object,
    files: ModelFiles,
    full_namespace: str,
    identity: Path,
) -> None:
    """The session runs manifests/admission/agent_endpointslices_policy.yaml as shipped (conftest).
    The agent serves a metal service end to end through the list the controller keeps (a slice of
    the listed Service, owned with its uid), and its token can add nothing to another Service. The
    Model turned CPU takes the Service off the list and the agent still withdraws its slice (a
    delete of its own slice is allowed when the Service is no longer metal). A controller started
    again against all this writes nothing."""
    admin, ns = operator.cluster.admin(), full_namespace
    await start_agent()  # type: ignore[operator]
    admin.create(metal_model("tiny", files.url()), namespace=ns)
    admin.create(metal_isvc("chat", "tiny"), namespace=ns)
    address, port = await served(admin, ns, "chat")
    assert chat(address, port, server_key(admin, ns, "chat"))["object"] == "chat.completion"
    uid = admin.get("v1", "Service", "chat", ns)["metadata"]["uid"]
    assert metal_services(admin)[f"{ns}.chat"] == uid
    (registered,) = agent_slices(admin, ns, "host-a")
    assert [ref["uid"] for ref in registered["metadata"]["ownerReferences"]] == [uid]

    # The agent's own token (what a thief of its kubeconfig holds): the API server's Service and
    # a Service of its own making in this namespace get no endpoint.
    stolen = KubeRest.from_kubeconfig(identity)
    kubernetes = admin.get("v1", "Service", "kubernetes", "default")
    forged = {
        **registered,
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kubernetes-host-a",
            "namespace": "default",
            "labels": {**registered["metadata"]["labels"], "kubernetes.io/service-name": "kubernetes"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": "kubernetes",
                    "uid": kubernetes["metadata"]["uid"],
                }
            ],
        },
    }
    with pytest.raises(RestError) as refused:
        stolen.apply(forged, field_manager="llmkube-agent")
    assert refused.value.status == 403
    assert "Service default/kubernetes is not a Service llmkube made for a metal InferenceService" in str(
        refused.value
    )
    assert admin.get_or_none("discovery.k8s.io/v1", "EndpointSlice", "kubernetes-host-a", "default") is None

    # Restarted: the same list, planned again from fresh caches, is not written again.
    assert operator.cluster.controller_kubeconfig is not None
    async with controller_running(operator.cluster.controller_kubeconfig, operator.config) as restarted:
        listing = reconcile_log(restarted.controllers.metal_services.controller)
        await poll(lambda: listing(restarted.controllers.metal_services.key) >= 1, what="the list reconciled")
        await restarted.idle()
        assert restarted.mutating_requests(SYSTEM) == 0
        assert restarted.mutating_requests(ns) == 0
        assert not [
            r for r in restarted.requests.api_requests if r.resource == "configmaps" and r.verb == "patch"
        ]

    # The Model is no longer metal: the Service gets its selector and leaves the list, and the agent
    # stops its server and deletes its slice.
    patch(admin, API, "Model", "tiny", ns, {"spec": {"hardware": {"accelerator": "cpu"}}})
    await eventually(lambda: f"{ns}.chat" not in metal_services(admin), what="the Service off the list")
    await eventually(lambda: not agent_slices(admin, ns, "host-a"), what="the agent's slice withdrawn")
    assert admin.get("v1", "Service", "chat", ns)["spec"].get("selector")
