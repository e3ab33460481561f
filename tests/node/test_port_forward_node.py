"""`llmkube benchmark SERVICE` measures the service, not its own port-forward: against a real
llama-server on a real kubelet and containerd, the time to the first token through the CLI's path
(a port-forward through the API server, the kubelet and containerd's forwarder, which holds a
stream a second after the server closed its end) is within tens of milliseconds of the direct
path's (a byte-for-byte TCP relay into the node's network, as `make run`'s own forward), where it
used to be about a second more. The defaults fit the service's slots (contextSize 256 over llama.cpp's 4):
no request fails for its size. The same against kwok's stand-in: tests/e2e/test_port_forward_streaming.py."""

import json
import subprocess
import sys
from typing import Any

import yaml
from conftest import ModelSource
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import condition_true
from llmkube_testing.tiny_service import tiny_llamacpp
from node_support import wait_for

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.usercli.benchmark.sizes import fitted_sizes

NAME = "measured"
SELECTOR = f"inference.llmkube.dev/service={NAME}"
#: what the port-forward may add to the median time to the first token: its hops (API server,
#: kubelet, containerd) cost tens of milliseconds on a 2-core machine (+47 ms measured in a CI run;
#: the goal of a few ms is not met), far from the second each stream was held for before
BUDGET = 0.15
REQUESTS = "12"


def benchmark(cluster: NodeCluster, *args: str) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-m", "llmkube.cli", "benchmark", *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert run.returncode == 0, run.stderr
    document: dict[str, Any] = json.loads(run.stdout)
    return document


def test_the_benchmark_through_the_cli_port_forward_adds_no_second_to_the_first_token(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, node_namespace: str
) -> None:
    admin, ns = node_cluster.admin(), node_namespace
    objects = tiny_llamacpp(ns, NAME, model_source.url())
    node_cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))

    def ready_pod() -> dict[str, Any] | None:
        pods = admin.list("v1", "Pod", ns, label_selector=SELECTOR)
        isvc = admin.get("inference.llmkube.dev/v1alpha1", "InferenceService", NAME, ns)
        ready = len(pods) == 1 and condition_true(pods[0], "Ready")
        return pods[0] if ready and (isvc.get("status") or {}).get("phase") == "Ready" else None

    pod = wait_for(ready_pod, within=300, what=f"{NAME} Ready")
    address = (str(pod["status"]["podIP"]), 8080)
    direct_forward = node_cluster.forward(address)
    try:
        common = ("-c", "1", "--requests", REQUESTS, "--warmup", "2")
        through_cli = benchmark(node_cluster, NAME, "-n", ns, *common)
        # The same sizes directly (a URL has no contextSize to fit: they are given).
        spec = admin.get("inference.llmkube.dev/v1alpha1", "InferenceService", NAME, ns)["spec"]
        sizes = fitted_sizes(InferenceServiceSpec.model_validate(spec), None, None)
        assert through_cli["settings"]["max_tokens"] == sizes.max_tokens < 128  # fitted to 64-token slots
        given = ("--prompt-tokens", str(sizes.prompt_tokens), "--max-tokens", str(sizes.max_tokens))
        direct = benchmark(node_cluster, "--url", f"http://{direct_forward.address}", *common, *given)
    finally:
        direct_forward.close()
    (cli_level,) = through_cli["levels"]
    (direct_level,) = direct["levels"]
    for level in (cli_level, direct_level):
        # The sizes fit one slot of the service's context: nothing is refused for its length.
        assert level["errors"] == {} and level["requests"] == int(REQUESTS), level
    assert through_cli["settings"]["target"].startswith(f"InferenceService {ns}/{NAME} via port-forward")
    cli_ttft, direct_ttft = cli_level["ttft"]["p50"], direct_level["ttft"]["p50"]
    assert cli_ttft - direct_ttft < BUDGET, (cli_level, direct_level)
    # The tokens came one by one through the forward too, not all at its end.
    assert cli_level["tpot"]["p50"] > 0 and cli_level["latency"]["p50"] - cli_ttft > 0, cli_level
