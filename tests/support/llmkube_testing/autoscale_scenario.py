"""What the autoscaling node test and bench/bench_autoscale.py share: the tiny llama.cpp service
with `spec.autoscaling`, `llmkube benchmark` run as a client inside the cluster's network, and what
to read while it scales (the service's status, the HPA's view of the metric, a pod's own counters).
"""

import json
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from llmkube.api.constants import API_VERSION, LABEL_SERVICE
from llmkube.apimachinery.quantity import parse_quantity
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import condition_true

PORT = 8080
FAST_PROBE = {"httpGet": {"path": "/health", "port": PORT}, "periodSeconds": 1, "failureThreshold": 600}


def autoscaled_spec(slots: int, max_replicas: int, **autoscaling: Any) -> dict[str, Any]:
    """A tiny_llamacpp spec: `slots` answers at once per server (more than the HPA's target of 2 in
    flight per pod, or llamacpp:requests_processing never passes it), probed every second."""
    return {
        "parallelSlots": slots,
        "contextSize": slots * 512,
        "probeOverrides": {"startup": FAST_PROBE, "readiness": FAST_PROBE},
        "autoscaling": {"minReplicas": 1, "maxReplicas": max_replicas, **autoscaling},
    }


def selector(name: str) -> str:
    return f"{LABEL_SERVICE}={name}"


@dataclass(frozen=True)
class Load:
    """One `llmkube benchmark --url` run at one concurrency level."""

    concurrency: int
    seconds: float
    max_tokens: int = 64
    prompt_tokens: int = 32

    def args(self, url: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "llmkube.cli",
            "benchmark",
            "--url",
            url,
            "--concurrency",
            str(self.concurrency),
            "--duration",
            str(self.seconds),
            "--prompt-tokens",
            str(self.prompt_tokens),
            "--max-tokens",
            str(self.max_tokens),
            "--warmup",
            "0",
            "-o",
            "json",
        ]


def start_benchmark(node: NodeCluster, url: str, load: Load) -> subprocess.Popen[str]:
    """`llmkube benchmark` against a Service address, from inside the node's network, where a
    client in the cluster sits: the Service spreads the streams over the Ready replicas."""
    return subprocess.Popen(
        load.args(url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=node.network.child_setup(),
        env={"PATH": "/usr/bin:/bin", "HOME": str(node.workdir)},
    )


def benchmark_levels(process: subprocess.Popen[str], timeout: float) -> list[dict[str, Any]]:
    """The finished run's levels (its -o json); raises with its stderr when it failed."""
    out, err = process.communicate(timeout=timeout)
    if process.returncode != 0:
        raise RuntimeError(f"llmkube benchmark exited with {process.returncode}: {err[-2000:]}")
    levels: list[dict[str, Any]] = json.loads(out)["levels"]
    return levels


def replica_status(node: NodeCluster, namespace: str, name: str) -> tuple[int, int]:
    """(desiredReplicas, readyReplicas) of the InferenceService's status."""
    status = node.admin().get(API_VERSION, "InferenceService", name, namespace).get("status") or {}
    return int(status.get("desiredReplicas") or 0), int(status.get("readyReplicas") or 0)


def ready_pods(node: NodeCluster, namespace: str, name: str) -> list[dict[str, Any]]:
    pods = node.admin().list("v1", "Pod", namespace, label_selector=selector(name))
    return [p for p in pods if condition_true(p, "Ready") and not p["metadata"].get("deletionTimestamp")]


def tokens_predicted(node: NodeCluster, pod: dict[str, Any]) -> float:
    """The answer tokens this pod's llama-server generated so far (its own counter)."""
    url = f"http://{pod['status']['podIP']}:{PORT}/metrics"

    def read() -> str:
        with urllib.request.urlopen(url, timeout=10) as response:
            text: str = response.read().decode()
            return text

    text = node.network.run_inside(read, timeout=15)
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "llamacpp:tokens_predicted_total"
    )


def hpa_averages(node: NodeCluster, namespace: str, name: str) -> list[float]:
    """The per-pod averages of the HPA's Pods metrics, as its controller last read them."""
    hpa = node.admin().get("autoscaling/v2", "HorizontalPodAutoscaler", name, namespace)
    return [
        float(parse_quantity(m["pods"]["current"]["averageValue"]).value)
        for m in (hpa.get("status") or {}).get("currentMetrics") or ()
        if m.get("type") == "Pods"
    ]
