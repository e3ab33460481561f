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
from node_support import API, TIMINGS, Stopwatch, eventually_http, http, wait_for
from test_inference import patch_spec

from llmkube.plan.inferenceservice.drain import DRAINING, ROLLOUT_ANNOTATION
from llmkube.testing.node import NodeCluster
from llmkube.testing.rest import KubeRest, condition_true
from llmkube.testing.tiny_service import chat_request, tiny_llamacpp

NAME = "drained"
SELECTOR = f"inference.llmkube.dev/service={NAME}"
TOKENS = 6000  # several seconds of the tiny model on this machine's CPU
# One slot holding the whole context (the stream needs TOKENS of it), and probes every second, so
# the new pod is Ready, and the old one deleted, while the stream is still being generated.
FAST_PROBE = {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 1, "failureThreshold": 600}
SPEC: dict[str, Any] = {
    "contextSize": 8192,
    "parallelSlots": 1,
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


def test_a_drained_rollout_finishes_the_stream_in_flight(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, node_namespace: str
) -> None:
    admin, ns = node_cluster.admin(), node_namespace
    objects = tiny_llamacpp(ns, NAME, model_source.url(), **SPEC)
    objects[1]["metadata"]["annotations"] = {ROLLOUT_ANNOTATION: "drain"}
    node_cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
    old = wait_for(
        lambda: (
            (found := pods(admin, ns)) and len(found) == 1 and condition_true(found[0], "Ready") and found[0]
        ),
        within=300,
        what="one Ready pod",
    )
    (server,) = old["spec"]["containers"]
    assert server["lifecycle"]["preStop"]["exec"]["command"][3] == "llmkube-drain"
    assert old["spec"]["terminationGracePeriodSeconds"] == 2 + 300 + 30
    service = admin.get("v1", "Service", NAME, ns)
    url = f"http://{service['spec']['clusterIP']}:8080/v1/chat/completions"
    eventually_http(node_cluster, url, chat_request())

    stream = Stream()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(node_cluster.network.run_inside, lambda: stream_completion(url, stream), 180)
        assert stream.first_chunk.wait(60) and not stream.error, stream.error
        watch = Stopwatch()
        patch_spec(admin, ns, {"contextSize": 8448})
        old_name = old["metadata"]["name"]
        wait_for(
            lambda: any(
                p["metadata"]["name"] == old_name and p["metadata"].get("deletionTimestamp")
                for p in pods(admin, ns)
            ),
            within=120,
            what=f"the old pod {old_name} deleted by the rollout",
        )
        deleted_at = time.monotonic()
        TIMINGS["drain: contextSize change -> old pod deleted (s)"] = watch.seconds()
        # While the old pod drains, the service says so, and a new request is served (by the new pod).
        draining = wait_for(
            lambda: (
                next(
                    (
                        c
                        for c in (admin.get(API, "InferenceService", NAME, ns).get("status") or {}).get(
                            "conditions"
                        )
                        or ()
                        if c["type"] == DRAINING and c["status"] == "True"
                    ),
                    None,
                )
                or (stream.ended_at and {"reason": "stream already over", "message": ""})
            ),
            within=60,
            what="the Draining condition",
        )
        during = http(node_cluster, url, chat_request())  # once: not refused, not retried
        assert during.status == 200 and during.json()["usage"]["completion_tokens"] > 0
        done = running.result(timeout=200)
    # The stream was still being generated when its pod was deleted, and it got every token.
    assert done.ended_at > deleted_at, "the stream ended before the rollout reached its pod: make it longer"
    assert draining["reason"] == "WaitingForRequests", draining
    assert old_name in draining["message"]
    assert (done.error, done.done, done.finish_reason, done.predicted) == ("", True, "length", TOKENS)
    TIMINGS["drain: old pod deleted -> stream complete (s)"] = round(done.ended_at - deleted_at, 1)
    # The old pod went once it was idle, long before the timeout; the condition says it drained.
    wait_for(
        lambda: old_name not in {p["metadata"]["name"] for p in pods(admin, ns)},
        within=60,
        what="the old pod gone",
    )
    TIMINGS["drain: old pod deleted -> gone (s)"] = round(time.monotonic() - deleted_at, 1)
    wait_for(
        lambda: any(
            c["type"] == DRAINING and c["status"] == "False" and c["reason"] == "Drained"
            for c in (admin.get(API, "InferenceService", NAME, ns).get("status") or {}).get("conditions")
            or ()
        ),
        within=60,
        what="Draining False, Drained",
    )
    events = admin.list("v1", "Event", ns)
    assert any(e.get("reason") == "DrainStarted" and e["involvedObject"]["name"] == NAME for e in events)
    assert not any(e.get("reason") == "FailedPreStopHook" for e in events), [
        e["message"] for e in events if e.get("reason") == "FailedPreStopHook"
    ]


def test_without_the_annotation_the_rollout_cuts_the_stream(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, node_namespace: str
) -> None:
    admin, ns = node_cluster.admin(), node_namespace
    objects = tiny_llamacpp(ns, NAME, model_source.url(), **SPEC)
    node_cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
    old = wait_for(
        lambda: (
            (found := pods(admin, ns)) and len(found) == 1 and condition_true(found[0], "Ready") and found[0]
        ),
        within=300,
        what="one Ready pod",
    )
    assert "lifecycle" not in old["spec"]["containers"][0]
    service = admin.get("v1", "Service", NAME, ns)
    url = f"http://{service['spec']['clusterIP']}:8080/v1/chat/completions"
    eventually_http(node_cluster, url, chat_request())
    stream = Stream()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(node_cluster.network.run_inside, lambda: stream_completion(url, stream), 180)
        assert stream.first_chunk.wait(60) and not stream.error, stream.error
        patch_spec(admin, ns, {"contextSize": 8448})
        old_name = old["metadata"]["name"]
        wait_for(
            lambda: any(
                p["metadata"]["name"] == old_name and p["metadata"].get("deletionTimestamp")
                for p in pods(admin, ns)
            ),
            within=120,
            what=f"the old pod {old_name} deleted by the rollout",
        )
        deleted_at = time.monotonic()
        done = running.result(timeout=200)
    assert done.ended_at > deleted_at, "the stream ended before the rollout reached its pod: make it longer"
    # Cut: no closing [DONE], fewer tokens than asked.
    assert not done.done and (done.predicted or 0) < TOKENS, done
