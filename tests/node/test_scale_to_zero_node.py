"""Scale to zero on the real node: a tiny llama.cpp InferenceService annotated to sleep after 15 s
without a request, behind a ModelRouter whose router pod runs the image as its own ServiceAccount
(the Role the controller made for it). The service sleeps (its pod gone, Stopped/ScaledToZero), and
the first request through the router wakes it and gets a real completion: a whole answer the first
time, a stream the second. Each wake is one scale write (the router's 0 -> 1), and the status says
how long it took."""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from conftest import ModelSource
from llmkube_testing.node import NodeCluster
from llmkube_testing.pytest_plugin import fresh_namespace
from llmkube_testing.rest import KubeRest
from llmkube_testing.tiny_service import tiny_llamacpp
from node_support import API, TIMINGS, Stopwatch, deployment_available, ready_pods, wait_for
from test_router_node import client_pod, finished

from llmkube.api import constants as c

ROUTER = "wake-router"
PROXY = f"{ROUTER}-router-proxy"
MODEL = "sleepy"
IDLE = "15s"
TOKENS = 8


def model_router(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ModelRouter",
        "metadata": {"name": ROUTER, "namespace": namespace},
        "spec": {
            "backends": [{"name": MODEL, "tier": "local", "inferenceServiceRef": {"name": MODEL}}],
            "defaultRoute": MODEL,
            "proxy": {"replicas": 1},
        },
    }


@dataclass(frozen=True)
class Routed:
    namespace: str
    base: str


def scaled_to_zero(admin: KubeRest, namespace: str) -> bool:
    status = admin.get(API, "InferenceService", MODEL, namespace).get("status") or {}
    slept = [x for x in status.get("conditions") or () if x["type"] == c.CONDITION_SCALED_TO_ZERO]
    pods = admin.list("v1", "Pod", namespace, label_selector=f"inference.llmkube.dev/service={MODEL}")
    return (
        status.get("phase") == "Stopped"
        and status.get("schedulingStatus") == "ScaledToZero"
        and bool(slept)
        and slept[0]["status"] == "True"
        and not pods
    )


@pytest.fixture(scope="module")
def routed(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, request: pytest.FixtureRequest
) -> Iterator[Routed]:
    admin = node_cluster.admin()
    names: list[str] = []
    try:
        for ns in fresh_namespace(node_cluster, request):
            names.append(ns)
            objects = tiny_llamacpp(ns, MODEL, model_source.url(), contextSize=512)
            for obj in objects:
                if obj["kind"] == "InferenceService":
                    obj["metadata"]["annotations"] = {c.ANNOTATION_SCALE_TO_ZERO_AFTER: IDLE}
            node_cluster.kubectl_run(
                "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all([*objects, model_router(ns)])
            )

            def ready(namespace: str = ns) -> bool:
                pods = ready_pods(admin, namespace, f"inference.llmkube.dev/service={MODEL}")
                return deployment_available(admin, PROXY, namespace) and bool(pods)

            wait_for(ready, within=420, what="the service and its router ready")
            service = admin.get("v1", "Service", PROXY, ns)
            yield Routed(ns, f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}")
    finally:
        for name in names:

            def gone(namespace: str = name) -> bool:
                return admin.get_or_none("v1", "Namespace", namespace) is None

            wait_for(gone, within=180, what=f"{name} gone")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_it_sleeps_and_the_first_request_wakes_it_with_a_real_completion(
    node_cluster: NodeCluster, routed: Routed, stream: bool
) -> None:
    admin, ns = node_cluster.admin(), routed.namespace
    watch = Stopwatch()
    wait_for(lambda: scaled_to_zero(admin, ns), within=180, what="the service asleep, its pod gone")
    TIMINGS[f"scale to zero: asleep after {IDLE} idle (s, {'stream' if stream else 'whole'})"] = (
        watch.seconds()
    )
    deployment = admin.get("apps/v1", "Deployment", MODEL, ns)
    assert deployment["spec"]["replicas"] == 0
    generation = int(deployment["metadata"]["generation"])

    name = f"wake-{'stream' if stream else 'whole'}"
    watch = Stopwatch()
    plan = {"mode": "one", "base": routed.base, "model": MODEL, "stream": stream, "max_tokens": TOKENS}
    admin.create(client_pod(ns, name, plan))
    lines = finished(admin, ns, name, within=300)
    TIMINGS[f"scale to zero: first request at zero -> answered (s, {name})"] = watch.seconds()
    (result,) = [line for line in lines if line["kind"] == "result"]
    assert result["status"] == 200 and result["done"] and not result["error"], result
    assert result["completion_tokens"] == TOKENS and result["backend"] == MODEL, result
    if stream:
        assert result["chunks"] >= 2, result

    def awake() -> str | None:
        status = admin.get(API, "InferenceService", MODEL, ns).get("status") or {}
        found = [x for x in status.get("conditions") or () if x["type"] == c.CONDITION_SCALED_TO_ZERO]
        return (
            found[0]["message"]
            if found and found[0]["reason"] == "Awake" and "ready" in found[0]["message"]
            else None
        )

    message = wait_for(awake, within=60, what="the wake reported")
    assert "after the wake" in message
    deployment = admin.get("apps/v1", "Deployment", MODEL, ns)
    # The router's 0 -> 1, and the controller's apply that takes the sleeping mark off (a
    # Deployment's generation counts its annotations too): no other write of the count.
    assert int(deployment["metadata"]["generation"]) == generation + 2
    admin.delete("v1", "Pod", name, ns)
