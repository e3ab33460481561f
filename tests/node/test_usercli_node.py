"""The user commands against a real kubelet and a real llama-server: `llmkube chat` and `curl` go
through the API server's pods/portforward (WebSocket, v4.channel.k8s.io) to the kubelet and get
real tokens; `llmkube logs --download` shows the downloader's readable progress lines."""

import subprocess
import sys
from typing import Any

import yaml
from conftest import ModelSource
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import condition_true
from llmkube_testing.tiny_service import tiny_llamacpp
from node_support import wait_for

SELECTOR = "inference.llmkube.dev/service=chatty"


def llmkube(cluster: NodeCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmkube.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_chat_curl_and_logs_reach_the_real_server(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, node_namespace: str
) -> None:
    admin, ns = node_cluster.admin(), node_namespace
    objects = tiny_llamacpp(ns, "chatty", model_source.url())
    node_cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))

    def ready() -> bool:
        pods = admin.list("v1", "Pod", ns, label_selector=SELECTOR)
        status = (
            admin.get("inference.llmkube.dev/v1alpha1", "InferenceService", "chatty", ns).get("status")
        ) or {}
        return len(pods) == 1 and condition_true(pods[0], "Ready") and status.get("phase") == "Ready"

    wait_for(ready, within=300, what="chatty Ready")

    chat = llmkube(
        node_cluster, "chat", "chatty", "Hello, who are you?", "-n", ns, "--max-tokens", "8", "-o", "json"
    )
    assert chat.returncode == 0, chat.stderr
    answer: dict[str, Any] = yaml.safe_load(chat.stdout)
    assert answer["object"] == "chat.completion"
    assert answer["usage"]["completion_tokens"] > 0 and answer["usage"]["prompt_tokens"] > 0

    text = llmkube(node_cluster, "chat", "chatty", "Hello", "-n", ns, "--max-tokens", "4")
    assert text.returncode == 0, text.stderr
    assert "via port-forward to chatty-" in text.stderr and "completion tokens" in text.stderr

    health = llmkube(node_cluster, "curl", "chatty", "/health", "-n", ns)
    assert health.returncode == 0 and '"status":"ok"' in health.stdout.replace(" ", ""), health

    logs = llmkube(node_cluster, "logs", "chatty", "--download", "-n", ns)
    assert logs.returncode == 0, logs.stderr
    # The downloader's own words: downloaded now, or found in the namespace's cache.
    assert "llmkube-download: done: 1 files, " in logs.stdout, logs.stdout
    assert "\r" not in logs.stdout
