"""`llmkube benchmark NAME`: an InferenceService found through the API server and measured through
the real pods/portforward (kwok's kubelet API answers with llmkube_testing.stdio_http, which sends
whole answers, so the run asks for whole answers). The figures against real llama.cpp are in
tests/integration/test_benchmark_llama_server.py."""

import json
from collections.abc import AsyncIterator

import pytest
from e2e_support import RunningController, delete_services_and_wait
from llmkube_testing.pytest_plugin import ClusterHandle
from usercli_support import llmkube

SOURCE = "https://models.invalid/tiny-chat-Q4_K_M.gguf"


@pytest.fixture(autouse=True)
async def services_gone_before_the_namespace(
    operator: RunningController, full_namespace: str
) -> AsyncIterator[None]:
    yield
    await delete_services_and_wait(operator, full_namespace, pods_too=True)


async def test_benchmark_a_service_through_a_port_forward(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    deployed = await llmkube(kc, "deploy", SOURCE, "-n", ns, "--memory", "1Gi", "--timeout", "90")
    assert deployed.code == 0, deployed.text

    run = await llmkube(
        kc,
        *("benchmark", "tiny-chat", "-n", ns, "--no-stream", "-c", "1,2", "--requests", "4"),
        *("--warmup", "1", "-o", "json"),
    )
    assert run.code == 0, run.text
    document = json.loads(run.out)
    assert document["settings"]["target"].startswith(
        f"InferenceService {ns}/tiny-chat via port-forward to tiny-chat-"
    )
    assert document["settings"]["url"].endswith("/v1/chat/completions")
    levels = document["levels"]
    assert [level["concurrency"] for level in levels] == [1, 2]
    for level in levels:
        # Every request answered through its own port-forward stream (the stand-in closes each one).
        assert level["requests"] == 4 and level["errors"] == {}, level
        assert level["output_tokens_mean"] > 0 and level["latency"]["p50"] > 0

    missing = await llmkube(kc, "benchmark", "nope", "-n", ns, "--requests", "1")
    assert missing.code == 1
    assert missing.err.strip().startswith("error:") and "nope" in missing.err
