"""An embedding-mode llama.cpp InferenceService (v0.9 `mode: embedding`) on the real node, behind a
ModelRouter whose default route is a chat service: a client pod's /v1/embeddings request goes to the
embedding service (the router reads the mode from its EndpointSlices' label) and gets a vector per
input from llama-server, while a chat completion for the same model name goes to the chat service.
And the pinned llama-server has the router mode the `llamacpp-router` runtime runs."""

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from conftest import ModelSource
from node_support import API, TIMINGS, Stopwatch, deployment_available, ready_pods, wait_for
from test_router_node import client_pod, finished

from llmkube.testing.host_llama_server import extracted_path
from llmkube.testing.node import NodeCluster
from llmkube.testing.pytest_plugin import fresh_namespace
from llmkube.testing.rest import KubeRest
from llmkube.testing.tiny_service import tiny_llamacpp

ROUTER = "modes"
PROXY = f"{ROUTER}-router-proxy"
SPEC: dict[str, Any] = {"contextSize": 512, "resources": {"cpu": "200m", "memory": "256Mi"}}


def model_router(namespace: str) -> dict[str, Any]:
    backends = [{"name": m, "tier": "local", "inferenceServiceRef": {"name": m}} for m in ("chat", "embed")]
    return {
        "apiVersion": API,
        "kind": "ModelRouter",
        "metadata": {"name": ROUTER, "namespace": namespace},
        "spec": {"backends": backends, "defaultRoute": "chat", "proxy": {"replicas": 1}},
    }


def ready(admin: KubeRest, namespace: str) -> bool:
    router = admin.get(API, "ModelRouter", ROUTER, namespace)
    return (
        (router.get("status") or {}).get("phase") == "Ready"
        and deployment_available(admin, PROXY, namespace)
        and all(
            len(ready_pods(admin, namespace, f"inference.llmkube.dev/service={name}")) == 1
            for name in ("chat", "embed")
        )
    )


@pytest.fixture(scope="module")
def routed(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, request: pytest.FixtureRequest
) -> Iterator[tuple[str, str]]:
    admin = node_cluster.admin()
    names: list[str] = []
    try:
        for ns in fresh_namespace(node_cluster, request):
            names.append(ns)
            objects = [
                *tiny_llamacpp(ns, "chat", model_source.url(), **SPEC),
                *tiny_llamacpp(ns, "embed", model_source.url(), mode="embedding", **SPEC),
                model_router(ns),
            ]
            watch = Stopwatch()
            node_cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
            wait_for(lambda ns=ns: ready(admin, ns), within=420, what="both services and the router Ready")
            TIMINGS["embeddings: apply chat + embed + router -> Ready (s)"] = watch.seconds()
            service = admin.get("v1", "Service", PROXY, ns)
            yield ns, f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"
    finally:
        for name in names:
            wait_for(
                lambda n=name: admin.get_or_none("v1", "Namespace", n) is None,
                within=180,
                what="namespace gone",
            )


def test_the_embedding_service_runs_llama_server_in_embedding_mode(
    node_cluster: NodeCluster, routed: tuple[str, str]
) -> None:
    admin, (ns, _) = node_cluster.admin(), routed
    isvc = admin.get(API, "InferenceService", "embed", ns)
    assert isvc["status"]["phase"] == "Ready" and isvc["status"]["mode"] == "embedding"
    assert admin.get(API, "InferenceService", "chat", ns)["status"]["mode"] == "chat"
    (container,) = admin.get("apps/v1", "Deployment", "embed", ns)["spec"]["template"]["spec"]["containers"]
    assert container["args"][-6:] == ["--embedding", "--pooling", "last", "--cache-ram", "0", "--metrics"]
    slices = admin.list(
        "discovery.k8s.io/v1", "EndpointSlice", ns, label_selector="kubernetes.io/service-name=embed"
    )
    assert slices and all(
        s["metadata"]["labels"]["inference.llmkube.dev/mode"] == "embedding" for s in slices
    )


def test_embeddings_go_to_the_embedding_service_through_the_router(
    node_cluster: NodeCluster, routed: tuple[str, str]
) -> None:
    admin, (ns, base) = node_cluster.admin(), routed
    plan = {"mode": "embed", "base": base, "model": "anything", "input": ["a first sentence", "and a second"]}
    watch = Stopwatch()
    admin.create(client_pod(ns, "client-embed", plan))
    lines = finished(admin, ns, "client-embed", within=180)
    TIMINGS["embeddings: client pod -> embeddings and a completion (s)"] = watch.seconds()
    (embeddings,) = [line for line in lines if line["kind"] == "embeddings"]
    assert embeddings["status"] == 200, embeddings
    assert embeddings["backend"] == "embed"
    assert embeddings["count"] == 2 and len(embeddings["dims"]) == 1 and embeddings["dims"][0] > 0
    assert embeddings["finite"]
    (chat,) = [line for line in lines if line["kind"] == "result"]
    assert chat["status"] == 200 and chat["backend"] == "chat", chat


def test_the_pinned_llama_server_has_router_mode() -> None:
    """What runtime `llamacpp-router` runs (plan/inferenceservice/runtimes/llamacpp_router.py)."""
    binary = extracted_path()
    if binary is None:
        pytest.skip("the node tier's llama-server is not extracted (make node-prereqs)")
    shown = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False)
    text = shown.stdout + shown.stderr
    for flag in (
        "--models-dir",
        "--models-preset",
        "--models-max",
        "--embedding",
        "--pooling",
        "--spec-type",
    ):
        assert flag in text, flag
