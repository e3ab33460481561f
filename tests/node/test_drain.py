"""Rollouts that drain, on the real node: a long streaming completion is in flight on the old pod
when the rollout deletes it. With `inference.llmkube.dev/rollout: drain` the old pod takes no new
request, finishes the stream (every token) and only then stops, while a new request is served by
the new pod; without it the old behaviour: the server stops at once and the stream is cut."""

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import yaml
from conftest import ModelSource
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import KubeRest, condition_true
from llmkube_testing.tiny_service import chat_request, tiny_llamacpp
from node_support import API, TIMINGS, Stopwatch, eventually_http, http, wait_for

from llmkube.plan.inferenceservice.drain import DRAINING, ROLLOUT_ANNOTATION

NAME = "drained"
SELECTOR = f"inference.llmkube.dev/service={NAME}"
# Eight streams of 4,000 tokens at once (llama-server caps a slot's context at the tiny model's
# training context, 4,096): 20-40 s of this machine's CPU, longer than the rollout takes. Probes
# every second, so the new pod is Ready, and the old one deleted, while they are being generated.
STREAMS = 8
TOKENS = 4000
FAST_PROBE = {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 1, "failureThreshold": 600}
SPEC: dict[str, Any] = {
    "contextSize": STREAMS * 4096,
    "parallelSlots": STREAMS,
    "probeOverrides": {"startup": FAST_PROBE, "readiness": FAST_PROBE},
}


@dataclass
class Stream:
    """What the client of one streamed completion saw."""

    chunks: int = 0
    done: bool = False  # the server's closing `data: [DONE]`
    predicted: int | None = None  # the server's own count of generated tokens (its last chunk)
    finish_reason: str | None = None
    error: str = ""
    first_chunk: threading.Event = field(default_factory=threading.Event)
    ended_at: float = 0.0


def stream_completion(url: str, out: Stream) -> Stream:
    body = {**chat_request("Tell me a long story.", TOKENS), "stream": True, "ignore_eos": True}
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            for raw in response:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    out.done = True
                    break
                chunk = json.loads(line[len("data: ") :])
                out.chunks += 1
                out.first_chunk.set()
                for choice in chunk.get("choices") or ():
                    out.finish_reason = choice.get("finish_reason") or out.finish_reason
                if "timings" in chunk:
                    out.predicted = chunk["timings"].get("predicted_n")
    except Exception as error:  # the cut stream: a reset, an incomplete read
        out.error = f"{type(error).__name__}: {error}"
    out.ended_at = time.monotonic()
    out.first_chunk.set()
    return out


def pods(admin: KubeRest, namespace: str) -> list[dict[str, Any]]:
    return admin.list("v1", "Pod", namespace, label_selector=SELECTOR)


def conditions(admin: KubeRest, namespace: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (
        admin.get(API, "InferenceService", NAME, namespace).get("status") or {}
    ).get("conditions") or []
    return found


def deploy(
    node: NodeCluster, admin: KubeRest, namespace: str, source: ModelSource, **meta: Any
) -> dict[str, Any]:
    """The service, and its one pod once Ready and answering through the Service."""
    objects = tiny_llamacpp(namespace, NAME, source.url(), **SPEC)
    objects[1]["metadata"].update(meta)
    node.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))

    def one_ready() -> dict[str, Any] | None:
        found = pods(admin, namespace)
        return found[0] if len(found) == 1 and condition_true(found[0], "Ready") else None

    pod: dict[str, Any] = wait_for(one_ready, within=300, what="one Ready pod")
    eventually_http(node, service_url(admin, namespace), chat_request())
    return pod


def service_url(admin: KubeRest, namespace: str) -> str:
    service = admin.get("v1", "Service", NAME, namespace)
    return f"http://{service['spec']['clusterIP']}:8080/v1/chat/completions"


def start_streams(node: NodeCluster, pool: ThreadPoolExecutor, url: str) -> list[tuple[Stream, Any]]:
    streams = [Stream() for _ in range(STREAMS)]
    started = [
        (stream, pool.submit(node.network.run_inside, lambda s=stream: stream_completion(url, s), 240))
        for stream in streams
    ]
    for stream in streams:
        assert stream.first_chunk.wait(60) and not stream.error, stream.error
    return started


def roll(admin: KubeRest, namespace: str, old: dict[str, Any]) -> float:
    """A new context size rolls the pods over: returns when the old pod was seen deleted."""
    admin.request(
        "PATCH",
        admin.path_for(API, "InferenceService", namespace, NAME),
        {"spec": {"contextSize": STREAMS * 4096 + 256}},
        content_type="application/merge-patch+json",
    )
    name = old["metadata"]["name"]
    wait_for(
        lambda: any(
            p["metadata"]["name"] == name and p["metadata"].get("deletionTimestamp")
            for p in pods(admin, namespace)
        ),
        within=120,
        what=f"the old pod {name} deleted by the rollout",
    )
    return time.monotonic()


def test_a_drained_rollout_finishes_the_streams_in_flight(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, node_namespace: str
) -> None:
    admin, ns = node_cluster.admin(), node_namespace
    old = deploy(node_cluster, admin, ns, model_source, annotations={ROLLOUT_ANNOTATION: "drain"})
    (server,) = old["spec"]["containers"]
    assert server["lifecycle"]["preStop"]["exec"]["command"][3] == "llmkube-drain"
    assert old["spec"]["terminationGracePeriodSeconds"] == 2 + 300 + 30
    url = service_url(admin, ns)
    with ThreadPoolExecutor(STREAMS) as pool:
        started = start_streams(node_cluster, pool, url)
        watch = Stopwatch()
        deleted_at = roll(admin, ns, old)
        TIMINGS["drain: contextSize change -> old pod deleted (s)"] = watch.seconds()
        # While the old pod drains, the service says so, and a new request is served (by the new pod).
        draining = wait_for(
            lambda: next(
                (c for c in conditions(admin, ns) if c["type"] == DRAINING and c["status"] == "True"), None
            ),
            within=60,
            what="the Draining condition",
        )
        # Once: not refused, not retried. kube-proxy may still send it to the draining pod (the new
        # pod's endpoint reaches it later on a loaded machine), whose slots are all busy with the
        # streams: it waits for one, as a client of a draining pod does, and is answered.
        during = http(node_cluster, url, chat_request(), timeout=240)
        streams = [future.result(timeout=240) for _, future in started]
    assert during.status == 200 and during.json()["usage"]["completion_tokens"] > 0
    assert draining["reason"] == "WaitingForRequests" and old["metadata"]["name"] in draining["message"], (
        draining
    )
    # The streams were still being generated when their pod was deleted, and each got every token.
    last = max(stream.ended_at for stream in streams)
    assert last > deleted_at, "the streams ended before the rollout reached their pod: make them longer"
    assert [(s.error, s.done, s.finish_reason, s.predicted) for s in streams] == [
        ("", True, "length", TOKENS)
    ] * STREAMS
    TIMINGS["drain: old pod deleted -> last stream complete (s)"] = round(last - deleted_at, 1)
    # The old pod went once idle, long before the timeout; the condition says it drained.
    gone = old["metadata"]["name"]
    wait_for(
        lambda: gone not in {p["metadata"]["name"] for p in pods(admin, ns)},
        within=60,
        what="the old pod gone",
    )
    TIMINGS["drain: old pod deleted -> gone (s)"] = round(time.monotonic() - deleted_at, 1)
    wait_for(
        lambda: any(
            c["type"] == DRAINING and (c["status"], c["reason"]) == ("False", "Drained")
            for c in conditions(admin, ns)
        ),
        within=60,
        what="Draining False, Drained",
    )
    events = admin.list("v1", "Event", ns)
    assert any(e.get("reason") == "DrainStarted" and e["involvedObject"]["name"] == NAME for e in events)
    hook_failures = [e["message"] for e in events if e.get("reason") == "FailedPreStopHook"]
    assert hook_failures == []


def test_without_the_annotation_the_rollout_cuts_the_streams(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, node_namespace: str
) -> None:
    admin, ns = node_cluster.admin(), node_namespace
    old = deploy(node_cluster, admin, ns, model_source)
    assert "lifecycle" not in old["spec"]["containers"][0]
    with ThreadPoolExecutor(STREAMS) as pool:
        started = start_streams(node_cluster, pool, service_url(admin, ns))
        roll(admin, ns, old)
        streams = [future.result(timeout=240) for _, future in started]
    # Cut when the server stopped: no closing [DONE], fewer tokens than asked. (A cut stream ends at
    # the deletion, before this test can see it, so being cut is what shows it was in flight.)
    cut = [s for s in streams if not s.done and (s.predicted or 0) < TOKENS]
    assert cut, [(s.error, s.done, s.predicted) for s in streams]
