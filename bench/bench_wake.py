"""A wake from zero, timed and split: the node tier (a real kubelet) with the controller of
`manifests/` (the node test's overlay), a tiny llama.cpp service annotated
`inference.llmkube.dev/scale-to-zero-after` behind a ModelRouter. Each round waits for the service
to sleep (its pod gone), then sends one streamed completion through the router and splits the time
from the request to its first token:

* `scale_write`: the router's read and write of the Deployment's scale (its `waking` log line);
* `pod_scheduled`, `container_started`, `pod_ready` (the model loaded: llama-server's health
  probe passes), from the pod's conditions and container status;
* `first_token`: the first streamed chunk at the client.

What is ours (the router holding the request and writing the scale, the controller's reconcile of
the Deployment, the router seeing the endpoint) is shown apart from what Kubernetes (scheduling,
the container start) and llama.cpp (the model load, the first token) take. The API's timestamps
have one-second resolution: the Kubernetes parts are rounded to it; the client's and the router's
own figures are not.

Needs root and the node tier's prerequisites (make node-prereqs).

Usage: .venv/bin/python bench/bench_wake.py [--rounds 10] [--idle 10s]
Prints one JSON object and saves it to bench/results/wake-<time>.json.
"""

import argparse
import json
import statistics
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from scale_support import machine_info, save_result

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmkube_testing.node import NodeCluster  # noqa: E402
from llmkube_testing.rest import KubeRest, condition_true, wait_until  # noqa: E402
from llmkube_testing.tiny_service import (  # noqa: E402
    chat_request,
    model_server,
    model_url,
    tiny_llamacpp,
    tiny_router,
    write_model_files,
)

from llmkube.api import constants as c  # noqa: E402

OVERLAY = REPO / "tests" / "node" / "overlay"
MODELS = "tiny-models"
NAMESPACE = "bench-wake"
SERVICE = "sleepy"
ROUTER = "wake"
STARTED = time.monotonic()


def say(what: str) -> None:
    print(f"[bench-wake {time.monotonic() - STARTED:6.1f} s] {what}", file=sys.stderr, flush=True)


def deployment_ready(admin: KubeRest, name: str, namespace: str) -> bool:
    found = admin.get_or_none("apps/v1", "Deployment", name, namespace)
    return found is not None and condition_true(found, "Available")


def service_pods(admin: KubeRest) -> list[dict[str, Any]]:
    return admin.list("v1", "Pod", NAMESPACE, label_selector=f"inference.llmkube.dev/service={SERVICE}")


def asleep(admin: KubeRest) -> bool:
    status = (
        admin.get("inference.llmkube.dev/v1alpha1", "InferenceService", SERVICE, NAMESPACE).get("status")
        or {}
    )
    return status.get("schedulingStatus") == c.CONDITION_SCALED_TO_ZERO and not service_pods(admin)


def epoch(text: str | None) -> float | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None


def first_token(base: str) -> tuple[float, float]:
    """Seconds to the headers and to the first streamed chunk of one completion (inside the node)."""
    body = json.dumps({**chat_request(max_tokens=8), "model": SERVICE, "stream": True}).encode()
    request = urllib.request.Request(
        base + "/v1/chat/completions", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=300) as answer:
        headers = time.monotonic() - started
        for raw in answer:
            if raw.startswith(b"data: ") and raw.strip() != b"data: [DONE]":
                return headers, time.monotonic() - started
    raise RuntimeError("the stream ended without a chunk")


def router_wake_line(admin: KubeRest, since: float) -> dict[str, Any] | None:
    (pod,) = admin.list("v1", "Pod", NAMESPACE, label_selector=f"inference.llmkube.dev/model-router={ROUTER}")
    code, text = admin.get_text(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}/log")
    found = None
    for line in text.splitlines() if code == 200 else ():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("msg") == "waking" and (epoch(entry.get("ts")) or since) >= since - 1:
                found = entry
    return found


def one_wake(node: NodeCluster, admin: KubeRest, base: str) -> dict[str, Any]:
    wait_until(lambda: asleep(admin), timeout=600, interval=0.5, what="asleep, its pod gone")
    sent = time.time()
    headers, first = node.network.run_inside(lambda: first_token(base), timeout=330)
    (pod,) = [p for p in service_pods(admin) if not p["metadata"].get("deletionTimestamp")]
    conditions = {
        x["type"]: epoch(x.get("lastTransitionTime")) for x in pod["status"].get("conditions") or ()
    }
    states = pod["status"].get("containerStatuses") or [{}]
    started = epoch(((states[0].get("state") or {}).get("running") or {}).get("startedAt"))
    wake = router_wake_line(admin, sent) or {}

    def since(at: float | None) -> float | None:
        return round(at - sent, 3) if at is not None else None

    return {
        "scale_write": wake.get("write_seconds"),
        "pod_created": since(epoch(pod["metadata"].get("creationTimestamp"))),
        "pod_scheduled": since(conditions.get("PodScheduled")),
        "container_started": since(started),
        "pod_ready": since(conditions.get("Ready")),
        "headers": round(headers, 3),
        "first_token": round(first, 3),
    }


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--idle", default="10s", help="the service's scale-to-zero-after (default 10s)")
    args = parser.parse_args()
    with NodeCluster() as node:
        admin = node.admin()
        say("node up; installing the controller")
        node.kubectl_run("apply", "--server-side", "-k", str(OVERLAY))
        wait_until(
            lambda: deployment_ready(admin, "llmkube-controller", "llmkube-system"),
            timeout=240,
            interval=1,
            what="controller",
        )
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MODELS}})
        for obj in model_server(MODELS, write_model_files(node.workdir / "model-files")):
            admin.apply(obj)
        wait_until(lambda: deployment_ready(admin, "tiny-model-server", MODELS), timeout=120, what="models")
        source = model_url(admin.get("v1", "Service", "tiny-model-server", MODELS)["spec"]["clusterIP"])
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        objects = tiny_llamacpp(NAMESPACE, SERVICE, source)
        for obj in objects:
            if obj["kind"] == "InferenceService":
                obj["metadata"]["annotations"] = {c.ANNOTATION_SCALE_TO_ZERO_AFTER: args.idle}
        objects.append(tiny_router(NAMESPACE, ROUTER, SERVICE))
        node.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
        proxy = f"{ROUTER}-router-proxy"
        wait_until(lambda: deployment_ready(admin, proxy, NAMESPACE), timeout=300, interval=1, what="router")
        service = admin.get("v1", "Service", proxy, NAMESPACE)
        base = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"
        rounds = []
        for n in range(args.rounds):
            rounds.append(one_wake(node, admin, base))
            say(f"wake {n + 1}/{args.rounds}: first token after {rounds[-1]['first_token']} s")
        keys = [k for k in rounds[0] if all(isinstance(r.get(k), float | int) for r in rounds)]
        result = {
            "benchmark": "wake",
            "machine": machine_info(node),
            "idle": args.idle,
            "rounds": rounds,
            "seconds_from_request": {k: spread([float(r[k]) for r in rounds]) for k in keys},
            "ours": "scale_write; pod_created - scale_write (the controller and the ReplicaSet); "
            "first_token - pod_ready, less llama.cpp's first token (the router seeing the endpoint)",
        }
    print(json.dumps(result, indent=2))
    print(f"saved to {save_result('wake', result)}", file=sys.stderr)


if __name__ == "__main__":
    main()
