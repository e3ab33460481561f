"""Our sample of the reference's ModelRouter (manifests/samples/router/coding-router.yaml, the fields
of its config/samples/inference_v1alpha1_modelrouter.yaml at v0.8.7 in our words) applies to a real
API server and routes as its comments say, through `llmkube router` watching it there.

Only the cloud backend's `url` is changed, to a stand-in speaking the OpenAI API on this machine
(api.anthropic.com is not reachable from tests), and the router allowed to send the key there; the
Secret's key is the file the kubelet would mount.
The local backend's InferenceService is an EndpointSlice of its Service naming another stand-in."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from llmkube_testing.openai_upstream import Upstream
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import KubeRest
from test_router_process_on_server import _eventually, _outbound_address, _running, _slice

from llmkube.api import constants as c
from llmkube.api.crds import all_crds
from llmkube.plan.allowed_hosts import parse_allowed_hosts
from llmkube.plan.router.providers import ANTHROPIC_VERSION
from llmkube.router.process import RouterSettings

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "manifests" / "samples" / "router" / "coding-router.yaml"
CHAT = "/v1/chat/completions"
KEY = "sk-ant-test-key"


def sample_objects(cloud_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sample's Secret and ModelRouter, the cloud backend's url pointed at `cloud_url`."""
    docs = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]
    secret = next(d for d in docs if d["kind"] == "Secret")
    router = next(d for d in docs if d["kind"] == c.ROUTER_KIND)
    (cloud,) = [b for b in router["spec"]["backends"] if "external" in b]
    assert cloud["external"]["url"] == "https://api.anthropic.com"
    cloud["external"]["url"] = cloud_url
    return secret, router


async def test_the_coding_router_sample_applies_and_routes_as_it_says(
    api_cluster: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    address = _outbound_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    apply_manifests(api_cluster, all_crds())
    admin: KubeRest = api_cluster.admin()
    local = await Upstream(name="qwen3-coder-pod", host=address).start()
    cloud = await Upstream(name="anthropic", host=address).start()
    # The key as the kubelet mounts the Secret the spec names (plan/router/objects.py).
    secret, router = sample_objects(cloud.url)
    key_dir = tmp_path / "credentials" / secret["metadata"]["name"]
    key_dir.mkdir(parents=True)
    (key_dir / "ANTHROPIC_API_KEY").write_text(KEY)
    try:
        await asyncio.to_thread(admin.create, secret, namespace=namespace)
        await asyncio.to_thread(admin.create, router, namespace=namespace)
        await asyncio.to_thread(admin.create, _slice("qwen3-coder", address, local.port), namespace=namespace)
        settings = RouterSettings(
            name="coding-router",
            namespace=namespace,
            kubeconfig=str(api_cluster.kubeconfig),
            host="127.0.0.1",
            port=0,
            secrets_dir=tmp_path,
            drain_delay=0.0,
            shutdown_grace=5.0,
            handle_signals=False,
            # A request for a backend with no ready pod waits this long for one before its 503
            # (30 s by default): the 503s this test asks for need not wait that long.
            endpoint_wait=1.0,
            # The key goes to the stand-in, not to api.anthropic.com: as an admin would allow with
            # the controller's --router-external-hosts, which it hands to the router's pods.
            external_hosts=parse_allowed_hosts(f"{address}:{cloud.port}"),
        )
        async with _running(settings) as process, aiohttp.ClientSession() as session:
            assert process.address is not None
            url = f"http://127.0.0.1:{process.address[1]}"

            async def ready() -> bool:
                async with session.get(url + "/readyz") as answer:
                    return answer.status == 200

            async def ask(**headers: str) -> tuple[int, str, str]:
                """(status, the stand-in that answered, the rule the router names)."""
                body = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}
                sent = {k.replace("_", "-"): v for k, v in headers.items()}
                async with session.post(url + CHAT, json=body, headers=sent) as answer:
                    await answer.read()
                    return (
                        answer.status,
                        answer.headers.get("X-Upstream", ""),
                        answer.headers.get("X-Llmkube-Rule", ""),
                    )

            await _eventually(ready)
            # Everything else: the default route, the local backend's pod.
            status, answered, _ = await ask()
            assert (status, answered) == (200, "qwen3-coder-pod")
            # Marked complex: the cloud model first, with Anthropic's headers and the provider's model.
            assert await ask(x_llmkube_task_complexity="complex") == (200, "anthropic", "complex-to-cloud")
            seen = cloud.seen[-1]
            headers = {k.lower(): v for k, v in seen.headers.items()}
            assert headers["x-api-key"] == KEY and headers["anthropic-version"] == ANTHROPIC_VERSION
            assert "authorization" not in headers
            assert seen.body["model"] == "claude-opus-4-7" and seen.path == CHAT
            # pii (even when complex) stays local...
            assert await ask(x_llmkube_classification="pii", x_llmkube_task_complexity="complex") == (
                200,
                "qwen3-coder-pod",
                "pii-stays-local",
            )
            before = cloud.requests
            # ... and when the local backend has no ready pod, it gets 503, never the cloud.
            await asyncio.to_thread(
                admin.apply, _slice("qwen3-coder", address, local.port, ready=False), namespace=namespace
            )

            async def local_gone() -> bool:
                return (await ask())[0] == 503

            await _eventually(local_gone)
            assert (await ask(x_llmkube_classification="phi", x_llmkube_task_complexity="complex"))[0] == 503
            assert cloud.requests == before
    finally:
        for upstream in (local, cloud):
            await upstream.stop()
