"""The host agent on the node tier, the real thing end to end: `llmkube agent` runs on the host side
of the node's network (a process beside the kubelet, not a pod), under its own identity
(manifests/agent/rbac.yaml and nothing else), and serves a metal InferenceService with llama-server
run natively (the binary of the node's llama.cpp image) from the tiny GGUF it fetched from a Service
of the cluster. The in-cluster controller turns the slice the agent registers into Ready, and a
client pod gets a real completion through the service's ClusterIP (kube-proxy routes it to the
node's address, where the agent's server listens). Then the server is killed (the endpoint is
withdrawn, the server restarted, the ClusterIP serves again), a contextSize change rolls without a
failed request through the ClusterIP, the agent stops (the controller reports the stale heartbeat
once the timeout the test overlay gives it has passed), and an agent with room for one server
adopts it and evicts it for a higher-priority service, which says so."""

import base64
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import ModelSource
from host_agent import HostAgent, kill_servers, server_pids
from llmkube_testing.host_llama_server import extract, runnable
from llmkube_testing.identities import service_account_kubeconfig
from llmkube_testing.images import CURL
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import KubeRest, load_yaml_documents
from llmkube_testing.tiny_service import chat_request
from node_support import API, TIMINGS, Stopwatch, eventually_http, http, wait_for

from llmkube.plan.inferenceservice.metal import AGENT_HEARTBEAT_STALE, parse_heartbeat

ROOT = Path(__file__).resolve().parents[2]
AGENT_RBAC = ROOT / "manifests" / "agent" / "rbac.yaml"
HEARTBEAT = "llmkube.ai/agent-heartbeat"
# What tests/node/overlay gives the controller (--metal-heartbeat-timeout), and the agent's beat.
HEARTBEAT_TIMEOUT = 20
HEARTBEAT_INTERVAL = 5


@pytest.fixture
def llama_server() -> Path:
    """The node image's llama-server, taken out of its archive for this host (cached)."""
    path = extract()
    if reason := runnable(path):
        pytest.fail(reason, pytrace=False)
    return path


@pytest.fixture
def agent_identity(node_cluster: NodeCluster, tmp_path: Path) -> Path:
    admin = node_cluster.admin()
    for doc in load_yaml_documents(AGENT_RBAC):
        admin.apply(doc)
    return service_account_kubeconfig(
        node_cluster.kubeconfig, "llmkube-system", "llmkube-agent", tmp_path / "agent.kubeconfig"
    )


@pytest.fixture
def host_agent(
    node_cluster: NodeCluster, agent_identity: Path, llama_server: Path, node_namespace: str, tmp_path: Path
) -> Iterator[HostAgent]:
    agent = HostAgent(
        node_cluster,
        [
            f"--kubeconfig={agent_identity}",
            "--name=node-host",
            f"--advertise-address={node_cluster.layout.node_ip}",
            f"--llama-server={llama_server}",
            f"--state-dir={tmp_path / 'state'}",
            f"--model-cache-dir={tmp_path / 'cache'}",
            # The model is served by a Service of the cluster, whose network the agent refuses by default.
            f"--model-source-allowed-hosts={node_cluster.layout.service_cidr}",
            f"--namespace={node_namespace}",
            f"--heartbeat-interval={HEARTBEAT_INTERVAL}",
        ],
    )
    try:
        yield agent
    finally:
        refused = 0.0
        if agent.process.poll() is None:
            refused = agent.sample("rest_client_requests_total", code="403")
            agent.stop()
        kill_servers(llama_server, tmp_path / "cache")  # the agent leaves its servers by design
        print(agent.tail())
    assert refused == 0, "the agent was refused a request its RBAC (manifests/agent/) should grant"


def status(admin: KubeRest, namespace: str, name: str = "chat") -> dict[str, Any]:
    return (admin.get_or_none(API, "InferenceService", name, namespace) or {}).get("status") or {}


def conditions(current: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in current.get("conditions") or ()}


def agent_slice(admin: KubeRest, namespace: str) -> dict[str, Any] | None:
    return admin.get_or_none("discovery.k8s.io/v1", "EndpointSlice", "chat-node-host", namespace)


def endpoint_ready(admin: KubeRest, namespace: str) -> bool | None:
    found = agent_slice(admin, namespace)
    endpoints = (found or {}).get("endpoints") or ()
    return bool(endpoints and (endpoints[0].get("conditions") or {}).get("ready")) if found else None


def server_key(admin: KubeRest, namespace: str, service: str) -> str:
    """The service's server key (the router mounts it; its host server asks for it)."""
    secret = admin.get("v1", "Secret", f"{service}-server-key", namespace)
    return base64.b64decode(secret["data"]["key"]).decode()


def complete_from_a_pod(admin: KubeRest, namespace: str, url: str, name: str, key: str) -> dict[str, Any]:
    """A client pod that POSTs one chat completion to `url` with the service's key and prints the answer."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "client",
                    "image": CURL.ref,
                    "imagePullPolicy": "Never",
                    "command": ["curl", "-sS", "--fail", "--max-time", "60", "-H"],
                    "args": [
                        "Content-Type: application/json",
                        "-H",
                        f"Authorization: Bearer {key}",
                        "-d",
                        json.dumps(chat_request()),
                        url,
                    ],
                }
            ],
        },
    }
    admin.create(pod)

    def finished() -> str | None:
        phase = (admin.get("v1", "Pod", name, namespace).get("status") or {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = wait_for(finished, within=120, interval=0.2, what=f"client pod {name} finished")
    code, log = admin.get_text(f"/api/v1/namespaces/{namespace}/pods/{name}/log")
    assert (phase, code) == ("Succeeded", 200), f"client pod {name}: {phase}, log ({code}): {log}"
    answer: dict[str, Any] = json.loads(log)
    return answer


def test_a_metal_service_is_served_by_a_host_agent_through_its_cluster_ip(
    node_cluster: NodeCluster,
    controller: str,
    model_source: ModelSource,
    node_namespace: str,
    host_agent: HostAgent,
    llama_server: Path,
    tmp_path: Path,
) -> None:
    admin, ns, cache = node_cluster.admin(), node_namespace, tmp_path / "cache"
    model = {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": "tiny", "namespace": ns},
        "spec": {"source": model_source.url(), "format": "gguf", "hardware": {"accelerator": "metal"}},
    }
    isvc: dict[str, Any] = {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": ns},
        "spec": {"modelRef": "tiny", "contextSize": 256, "endpoint": {"port": 8080}},
    }
    watch = Stopwatch()
    admin.create(model)
    admin.create(isvc)
    wait_for(lambda: status(admin, ns).get("phase") == "Ready", within=180, what="chat Ready")
    TIMINGS["agent: apply metal Model+InferenceService -> Ready (s)"] = watch.seconds()
    service = admin.get("v1", "Service", "chat", ns)
    assert "selector" not in service["spec"]  # the controller's metal path: no pods of its own
    assert admin.get_or_none("apps/v1", "Deployment", "chat", ns) is None
    url = f"http://{service['spec']['clusterIP']}:8080/v1/chat/completions"
    key = server_key(admin, ns, "chat")
    bearer = {"Authorization": f"Bearer {key}"}
    answer = complete_from_a_pod(admin, ns, url, "client-1", key)
    TIMINGS["agent: apply -> first completion from a pod through the ClusterIP (s)"] = watch.seconds()
    assert answer["object"] == "chat.completion"
    assert answer["usage"]["completion_tokens"] > 0 and answer["usage"]["prompt_tokens"] > 0
    registered = agent_slice(admin, ns)
    assert registered is not None
    assert [e["addresses"] for e in registered["endpoints"]] == [[node_cluster.layout.node_ip]]
    assert registered["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == "agent.llmkube.ai"
    (pid,) = server_pids(llama_server, cache)
    assert not Path(f"/proc/{pid}/cgroup").read_text().count("kubepods")  # beside the kubelet, not under it
    print(f"agent RSS with one model served: {host_agent.rss() / 2**20:.1f} MiB")

    # The server killed: the endpoint is withdrawn, the server restarted, the ClusterIP serves again.
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: endpoint_ready(admin, ns) is False, within=30, interval=0.1, what="withdrawn")
    eventually_http(node_cluster, url, chat_request(), within=90, headers=bearer)
    gap = round(time.monotonic() - killed, 1)
    TIMINGS["agent: llama-server killed -> ClusterIP serves again (s)"] = gap
    (restarted,) = server_pids(llama_server, cache)
    assert restarted != pid
    assert complete_from_a_pod(admin, ns, url, "client-2", key)["object"] == "chat.completion"
    assert host_agent.sample("llmkube_agent_process_restarts_total", namespace=ns, name="chat") == 1

    # A contextSize change rolls in place (the new server ready, then the endpoint moves, then the
    # old one stops) without a failed request through the ClusterIP, as kube-proxy follows the slice.
    before = restarted
    stop_client = threading.Event()
    answered: list[int] = []
    failed: list[str] = []

    def client() -> None:
        while not stop_client.is_set():
            try:
                reply = http(node_cluster, url, chat_request(), headers=bearer, timeout=30)
            except OSError as error:
                failed.append(repr(error))
                continue
            if reply.status == 200:
                answered.append(reply.status)
            else:
                failed.append(f"HTTP {reply.status}: {reply.body[:200]!r}")

    def rolled() -> int | None:
        pids = server_pids(llama_server, cache)
        if before in pids or len(pids) != 1:
            return None
        arguments = Path(f"/proc/{pids[0]}/cmdline").read_bytes().split(b"\0")
        return pids[0] if arguments[arguments.index(b"--ctx-size") + 1] == b"512" else None

    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(client)
        try:
            wait_for(lambda: len(answered) >= 3, within=60, what="the client served before the roll")
            rolling = Stopwatch()
            admin.request(
                "PATCH",
                admin.path_for(API, "InferenceService", ns, "chat"),
                {"spec": {"contextSize": 512}},
                content_type="application/merge-patch+json",
            )
            wait_for(rolled, within=120, interval=0.2, what="the new server alone, at --ctx-size 512")
            TIMINGS["agent: contextSize change -> the old server stopped (s)"] = rolling.seconds()
            served_before = len(answered)
            wait_for(lambda: len(answered) >= served_before + 3, within=60, what="served after the roll")
        finally:
            stop_client.set()
            running.result(timeout=60)
    assert failed == [], failed
    need = host_agent.sample("llmkube_agent_memory_used_bytes")
    assert need > 0

    # The agent stops (its host went away): no more heartbeats, and the controller says so once
    # the last one is older than its timeout.
    assert host_agent.stop() == 0
    stopped = time.monotonic()
    last = agent_slice(admin, ns)
    assert last is not None
    beat = parse_heartbeat(last["metadata"]["annotations"][HEARTBEAT])
    assert beat is not None

    def stale() -> dict[str, Any] | None:
        current = status(admin, ns)
        found = [c for c in conditions(current).values() if c.get("reason") == AGENT_HEARTBEAT_STALE]
        return found[0] if found else None

    within = HEARTBEAT_TIMEOUT + 30
    condition = wait_for(stale, within=within, interval=0.1, what="the stale heartbeat reported")
    seen = datetime.now(UTC)
    after_beat = (seen - beat).total_seconds()
    TIMINGS["agent: last heartbeat -> stale reported (s, timeout 20)"] = round(after_beat, 1)
    TIMINGS["agent: agent stopped -> stale reported (s)"] = round(time.monotonic() - stopped, 1)
    assert "heartbeat stale" in condition["message"]
    assert HEARTBEAT_TIMEOUT <= after_beat < HEARTBEAT_TIMEOUT + 5
    assert status(admin, ns).get("readyReplicas", 0) == 0

    # The host comes back with room for one server of the tiny model, not two: the new agent adopts
    # the server that runs (the heartbeat resumes), then a higher-priority service evicts it.
    second = HostAgent(node_cluster, [*host_agent.args, f"--memory-budget={int(need * 1.5)}"])
    refused = 0.0
    try:
        wait_for(lambda: second.logged("server adopted"), within=60, what="the running server adopted")
        wait_for(lambda: status(admin, ns).get("phase") == "Ready", within=60, what="chat Ready again")
        admin.create(
            {
                **isvc,
                "metadata": {"name": "high", "namespace": ns},
                "spec": {**isvc["spec"], "priority": "high"},
            }
        )
        wait_for(lambda: status(admin, ns, "high").get("phase") == "Ready", within=180, what="high Ready")
        high = admin.get("v1", "Service", "high", ns)["spec"]["clusterIP"]
        answer = complete_from_a_pod(
            admin, ns, f"http://{high}:8080/v1/chat/completions", "client-3", server_key(admin, ns, "high")
        )
        assert answer["object"] == "chat.completion"

        def evicted() -> dict[str, Any] | None:
            current = status(admin, ns)
            found = [c for c in conditions(current).values() if c.get("reason") == "Evicted"]
            return found[0] if current.get("phase") == "Failed" and found else None

        condition = wait_for(evicted, within=60, interval=0.2, what="chat reported Evicted")
        assert f"to make room for {ns}/high" in condition["message"]
        assert second.sample("llmkube_agent_evictions_total", reason="priority") == 1
        assert len(server_pids(llama_server, cache)) == 1
        refused = second.sample("rest_client_requests_total", code="403")
    finally:
        second.stop()
        print(second.tail())
    assert refused == 0


def tenant_client(node_cluster: NodeCluster, namespace: str, workdir: Path) -> KubeRest:
    """A tenant as a platform hands it a namespace: llmkube-editor there, nothing else."""
    admin = node_cluster.admin()
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "tenant", "namespace": namespace},
        }
    )
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant-llmkube-editor", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "llmkube-editor",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
        }
    )
    kubeconfig = service_account_kubeconfig(
        node_cluster.kubeconfig, namespace, "tenant", workdir / "tenant.kubeconfig"
    )
    return KubeRest.from_kubeconfig(kubeconfig)


def test_a_tenant_cannot_reach_the_agents_host(
    node_cluster: NodeCluster,
    controller: str,
    model_source: ModelSource,
    node_namespace: str,
    host_agent: HostAgent,
    llama_server: Path,
    tmp_path: Path,
) -> None:
    """On the node tier: what a tenant got before the allowlist (`--path /` served the host's
    /etc/passwd on every interface through the service's host port) ends with the flag named in
    status, no server started; what it may run listens only on the advertise address and answers
    only with the service's key: through the ClusterIP, the router's path, with it."""
    admin, ns = node_cluster.admin(), node_namespace
    tenant = tenant_client(node_cluster, ns, tmp_path)
    tenant.create(
        {
            "apiVersion": API,
            "kind": "Model",
            "metadata": {"name": "tiny", "namespace": ns},
            "spec": {"source": model_source.url(), "format": "gguf", "hardware": {"accelerator": "metal"}},
        }
    )

    def isvc(name: str, extra: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": API,
            "kind": "InferenceService",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"modelRef": "tiny", "contextSize": 256, "endpoint": {"port": 8080}, "extraArgs": extra},
        }

    tenant.create(isvc("files", ["--path", "/", "--host", "0.0.0.0"]))
    tenant.create(isvc("chat", ["--temp", "0.2"]))

    def refused() -> str | None:
        current = status(admin, ns, "files")
        said = [c for c in conditions(current).values() if c.get("reason") == "UnsupportedByAgent"]
        return said[0].get("message", "") if current.get("phase") == "Failed" and said else None

    message = wait_for(refused, within=180, what="files refused by the agent")
    assert 'spec.extraArgs[0] "--path"' in message and "serves the host's files" in message, message
    wait_for(lambda: status(admin, ns).get("phase") == "Ready", within=180, what="chat Ready")
    assert len(server_pids(llama_server, tmp_path / "cache")) == 1  # chat's only: files never started

    registered = agent_slice(admin, ns)
    assert registered is not None
    port = registered["ports"][0]["port"]
    node_ip = node_cluster.layout.node_ip
    # Bound to the advertise address only: nothing answers on the host's other addresses.
    with pytest.raises(OSError):
        http(node_cluster, f"http://127.0.0.1:{port}/health", timeout=5)
    assert http(node_cluster, f"http://{node_ip}:{port}/health").status == 200
    # Without the key nothing but /health, on the host port and through the ClusterIP alike.
    assert http(node_cluster, f"http://{node_ip}:{port}/etc/passwd").status == 401
    cluster_ip = admin.get("v1", "Service", "chat", ns)["spec"]["clusterIP"]
    url = f"http://{cluster_ip}:8080/v1/chat/completions"

    def answered() -> int | None:  # kube-proxy's rules follow the slice a moment after readiness
        try:
            return http(node_cluster, url, chat_request(), timeout=10).status
        except OSError:
            return None

    assert wait_for(answered, within=60, interval=0.5, what=f"an answer from {url}") == 401
    key = server_key(admin, ns, "chat")
    reply = eventually_http(node_cluster, url, chat_request(), headers={"Authorization": f"Bearer {key}"})
    assert json.loads(reply.body)["object"] == "chat.completion"
