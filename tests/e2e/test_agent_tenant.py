"""A tenant against the host agent: a tenant who may create metal InferenceServices in its
own namespace (llmkube-editor, nothing else) tries to turn the agent's host into its own. The real
agent under its own identity, the real llama-server, the session's controller:

* every extraArgs flag that would read, serve or write a host file, listen elsewhere, fetch past the
  egress rules or hand the model tools ends with the service Failed/UnsupportedByAgent naming it, an
  Event, and no server started;
* a priority the namespace may not use is refused by the controller, and the agent neither starts
  that spec nor evicts anyone for it; a running service edited to such a spec keeps its server;
* the server answers only with the service's key, which the tenant cannot read (only the router,
  which mounts it, and whoever may read the namespace's Secrets).
"""

import asyncio
import urllib.error
from pathlib import Path

import aiohttp
import pytest
from agent_fixtures import agent_reasons
from agent_support import (
    AgentProcess,
    ModelFiles,
    chat,
    command_line,
    metal_isvc,
    metal_model,
    served,
    server_key,
    server_pids,
    status,
)
from e2e_support import API, RunningController, conditions, eventually, patch_isvc
from llmkube_testing.identities import service_account_kubeconfig
from tenant_support import Tenant, assert_denied, tenant_in

from llmkube.cli import build_parser
from llmkube.plan.tenancy import MAX_PRIORITY_LABEL
from llmkube.router.command import router_settings
from llmkube.router.process import RouterProcess

pytestmark = [pytest.mark.e2e, pytest.mark.node_prereqs]  # llama-server, from the node tier's image

HOSTILE = {
    "path": ["--path", "/"],
    "listen": ["--host", "0.0.0.0"],
    "model": ["-m", "/etc/passwd"],
    "template": ["--chat-template-file", "/etc/shadow"],
    "logfile": ["--log-file", "/etc/cron.d/tenant"],
    "fetch": ["-mu", "http://169.254.169.254/latest/meta-data/"],
    "hub": ["-hf", "evil/preset-repo"],
    "tools": ["--tools", "all"],
    "key": ["--api-key", "mine"],
    "underscore": ["--log_file", "/tmp/x"],
    "memory": ["--parallel", "512"],
}


@pytest.fixture
def tenant(operator: RunningController, full_namespace: str, tmp_path: Path) -> Tenant:
    admin = operator.cluster.admin()
    namespace = admin.get("v1", "Namespace", full_namespace)
    labels = {**(namespace["metadata"].get("labels") or {}), MAX_PRIORITY_LABEL: "batch"}
    admin.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": full_namespace, "labels": labels}}
    )
    return tenant_in(operator.cluster, full_namespace, tmp_path)


async def test_no_flag_that_reaches_past_the_server_is_passed(
    operator: RunningController, start_agent: object, files: ModelFiles, tenant: Tenant, binary: Path
) -> None:
    admin, ns = operator.cluster.admin(), tenant.namespace
    agent: AgentProcess = await start_agent()  # type: ignore[operator]
    tenant.client.create(metal_model("tiny", files.url()), namespace=ns)
    for name, args in HOSTILE.items():
        tenant.client.create(
            metal_isvc(name, "tiny", extraArgs=args, priorityClassName="llmkube-batch"), namespace=ns
        )
    tenant.client.create(
        metal_isvc(
            "tuned", "tiny", extraArgs=["--temp", "0.2", "--threads", "1"], priorityClassName="llmkube-batch"
        ),
        namespace=ns,
    )
    address, port = await served(admin, ns, "tuned")  # what the allowlist passes is served

    def refused() -> dict[str, str] | None:
        found = {}
        for name in HOSTILE:
            current = status(admin, name, ns)
            reasons = {c.get("reason"): c.get("message", "") for c in conditions(current).values()}
            if current.get("phase") != "Failed" or "UnsupportedByAgent" not in reasons:
                return None
            found[name] = reasons["UnsupportedByAgent"]
        return found

    messages = await eventually(refused, what="every hostile service refused by the agent")
    for name, args in HOSTILE.items():
        assert f'spec.extraArgs[0] "{args[0]}" is not passed to llama-server' in messages[name], messages[
            name
        ]
    assert "serves the host's files" in messages["path"]
    assert "UnsupportedByAgent" in agent_reasons(admin, ns)
    # One server, the allowed one's: none of the others ever started.
    (pid,) = server_pids(binary, agent.cache_dir)
    assert str(port) in command_line(pid)
    assert not agent.logged("server started", service=f"{ns}/path")
    assert chat(address, port, server_key(admin, ns, "tuned"))["object"] == "chat.completion"


async def test_a_priority_the_namespace_may_not_use_starts_and_evicts_nothing(
    operator: RunningController, start_agent: object, files: ModelFiles, tenant: Tenant, binary: Path
) -> None:
    admin, ns = operator.cluster.admin(), tenant.namespace
    first: AgentProcess = await start_agent("--heartbeat-interval=5")  # type: ignore[operator]
    tenant.client.create(metal_model("tiny", files.url()), namespace=ns)
    tenant.client.create(metal_isvc("resident", "tiny", priorityClassName="llmkube-batch"), namespace=ns)
    address, port = await served(admin, ns, "resident")
    need = first.sample("llmkube_agent_memory_used_bytes")
    await first.stop()
    # Room for one server: a spec the agent took at its word would evict the resident one.
    budget = f"--memory-budget={int(need * 1.5)}"
    agent: AgentProcess = await start_agent("--heartbeat-interval=5", budget)  # type: ignore[operator]
    await eventually(lambda: agent.logged("server adopted"), what="the resident server adopted")
    (resident_pid,) = server_pids(binary, agent.cache_dir)

    for name, priority in (("greedy", "system-node-critical"), ("pushy", "llmkube-critical")):
        tenant.client.create(metal_isvc(name, "tiny", priorityClassName=priority), namespace=ns)

    def refused() -> bool:
        judged = [conditions(status(admin, n, ns)).get("Accepted") or {} for n in ("greedy", "pushy")]
        return all(c.get("status") == "False" and c.get("reason") == "PolicyViolation" for c in judged)

    await eventually(refused, what="both refused by the controller")
    # A few of the agent's reconciles later: still the one resident server, never evicted.
    await eventually(
        lambda: agent.sample("controller_runtime_reconcile_total", controller="metal-agent") >= 4,
        what="the agent reconciled them",
    )
    assert server_pids(binary, agent.cache_dir) == [resident_pid]
    assert agent.sample("llmkube_agent_evictions_total", reason="priority") == 0
    assert not agent.logged("service evicted")
    assert status(admin, "resident", ns)["phase"] == "Ready"
    assert chat(address, port, server_key(admin, ns, "resident"))["object"] == "chat.completion"

    # The resident one edited to a refused priority: what runs keeps running; edited back, it is
    # the same server (the spec that runs is the one accepted).
    patch_isvc(tenant.client, "resident", ns, {"priorityClassName": "llmkube-critical"})
    await eventually(
        lambda: (conditions(status(admin, "resident", ns)).get("Accepted") or {}).get("status") == "False",
        what="the edit refused",
    )
    assert server_pids(binary, agent.cache_dir) == [resident_pid]
    patch_isvc(tenant.client, "resident", ns, {"priorityClassName": "llmkube-batch"})
    await served(admin, ns, "resident")
    assert server_pids(binary, agent.cache_dir) == [resident_pid]


async def test_the_server_answers_only_with_the_services_key(
    operator: RunningController, start_agent: object, files: ModelFiles, tenant: Tenant
) -> None:
    admin, ns = operator.cluster.admin(), tenant.namespace
    await start_agent()  # type: ignore[operator]
    tenant.client.create(metal_model("tiny", files.url()), namespace=ns)
    tenant.client.create(metal_isvc("chat", "tiny", priorityClassName="llmkube-batch"), namespace=ns)
    address, port = await served(admin, ns, "chat")
    for key in (None, "wrong"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            chat(address, port, key)
        assert refused.value.code == 401
    assert chat(address, port, server_key(admin, ns, "chat"))["object"] == "chat.completion"
    assert_denied(tenant, "GET", f"/api/v1/namespaces/{ns}/secrets/chat-server-key")
    secret = admin.get("v1", "Secret", "chat-server-key", ns)
    owner = secret["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("InferenceService", "chat")


async def test_a_router_in_front_of_a_metal_service_sends_its_key(
    operator: RunningController, start_agent: object, files: ModelFiles, tenant: Tenant, tmp_path: Path
) -> None:
    """The real `llmkube router`, with the arguments and mounts its Deployment gives it (the
    controller's pod spec: the service's key Secret at /var/run/llmkube/server-keys/<service>),
    gets completions from the keyed host server; the same router without the mount gets none."""
    admin, ns = operator.cluster.admin(), tenant.namespace
    await start_agent()  # type: ignore[operator]
    tenant.client.create(metal_model("tiny", files.url()), namespace=ns)
    tenant.client.create(metal_isvc("chat", "tiny", priorityClassName="llmkube-batch"), namespace=ns)
    await served(admin, ns, "chat")
    router = {
        "apiVersion": API,
        "kind": "ModelRouter",
        "metadata": {"name": "front"},
        "spec": {
            "backends": [{"name": "host", "inferenceServiceRef": {"name": "chat"}}],
            "defaultRoute": "host",
        },
    }
    tenant.client.create(router, namespace=ns)
    deployment = await eventually(
        lambda: admin.get_or_none("apps/v1", "Deployment", "front-router-proxy", ns),
        what="the router's Deployment",
    )
    pod = deployment["spec"]["template"]["spec"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if "server-keys" in m["mountPath"]]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert (mount["mountPath"], volume["secret"]["secretName"]) == (
        "/var/run/llmkube/server-keys/chat",
        "chat-server-key",
    )

    identity = service_account_kubeconfig(
        operator.cluster.kubeconfig, ns, "front-router-proxy", tmp_path / "router.kubeconfig"
    )
    body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    for mounted, expected in ((True, 200), (False, 401)):
        secrets = tmp_path / ("mounted" if mounted else "bare")
        (secrets / "server-keys" / "chat").mkdir(parents=True)
        if mounted:  # as the kubelet mounts the Secret: one file per key
            (secrets / "server-keys" / "chat" / "key").write_text(server_key(admin, ns, "chat"))
        args = build_parser().parse_args(
            [
                "router",
                *pod["containers"][0]["args"],
                f"--namespace={ns}",
                f"--kubeconfig={identity}",
                f"--secrets-dir={secrets}",
                "--listen=127.0.0.1:0",
                "--endpoint-wait=5",
            ]
        )
        settings = router_settings(args)
        settings.drain_delay, settings.shutdown_grace, settings.handle_signals = 0.0, 5.0, False
        process = RouterProcess(settings)
        task = asyncio.get_running_loop().create_task(process.run())
        try:
            await asyncio.wait_for(process.started.wait(), 30)
            assert process.address is not None
            url = f"http://127.0.0.1:{process.address[1]}/v1/chat/completions"
            async with aiohttp.ClientSession() as session:
                code = await post_status(session, url, body)
                for _ in range(50):  # the router's watch brings the backend's endpoints
                    if code != 503:
                        break
                    await asyncio.sleep(0.2)
                    code = await post_status(session, url, body)
                assert code == expected
        finally:
            process.request_stop()
            await asyncio.wait_for(task, 30)


async def post_status(session: aiohttp.ClientSession, url: str, body: dict[str, object]) -> int:
    async with session.post(url, json=body) as answer:
        await answer.read()
        return answer.status
