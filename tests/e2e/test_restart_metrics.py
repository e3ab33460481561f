"""Dashboards survive a restart: the state gauges (phase, GPU queue depth, Model status) come from
the caches, so a freshly started controller process reports every converged object at once, before
and without any write."""

import contextlib
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from e2e_support import (
    RunningController,
    delete_services_and_wait,
    eventually,
    eventually_equal,
    gpus_idle,
    hf_model,
    isvc,
    model,
    phase_is,
    settled,
    status_of,
    writes_quiesce,
)
from prometheus_client.parser import text_string_to_metric_families

EXPECTED_PHASES = {
    "cpu": "Ready",
    "holder": "Ready",  # the only node with two GPUs, kept by a priority the waiting ones cannot preempt
    "stopped": "Stopped",
    "waiting-a": "WaitingForGPU",
    "waiting-b": "WaitingForGPU",
    "orphan": "Failed",  # its Model does not exist
    "pending": "Pending",  # its Model is not Ready
}
EXPECTED_MODELS = {"hf": "Ready", "cuda": "Ready", "claim": "Failed"}
ISVC_PHASES = (
    "Pending",
    "Creating",
    "Progressing",
    "Ready",
    "WaitingForGPU",
    "Stopped",
    "Failed",
    "Suspended",
)
MODEL_PHASES = ("Pending", "Downloading", "Copying", "Ready", "Failed")
MUTATING = {"POST", "PUT", "PATCH", "DELETE"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def controller_process(kubeconfig: Path, namespace: str, log: Path) -> Iterator[tuple[str, str]]:
    """The controller as its own OS process (like a restarted pod), scoped to one namespace, with
    the controller's identity; yields its metrics and health URLs. Stopped by its PID."""
    metrics, health = free_port(), free_port()
    command = [
        sys.executable, "-m", "llmkube.cli", "controller",
        "--kubeconfig", str(kubeconfig),
        "--namespace", namespace,
        "--no-leader-elect",
        "--metrics-bind-address", f"127.0.0.1:{metrics}",
        "--health-probe-bind-address", f"127.0.0.1:{health}",
        "--log-format", "json",
    ]  # fmt: skip
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        try:
            yield f"http://127.0.0.1:{metrics}/metrics", f"http://127.0.0.1:{health}/readyz"
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text: str = response.read().decode()
            return text
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def samples(text: str, name: str, namespace: str | None = None) -> dict[tuple[str, ...], float]:
    """{label values (sorted by label name): value} of one metric, in one namespace if given."""
    found: dict[tuple[str, ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != name:
                continue
            if namespace is not None and sample.labels.get("namespace") != namespace:
                continue
            key = tuple(value for _, value in sorted(sample.labels.items()) if _ != "namespace")
            found[key] = sample.value
    return found


def mutating_requests(text: str) -> dict[str, float]:
    counts: dict[str, float] = {}
    for labels, value in samples(text, "rest_client_requests_total").items():
        # labels sorted by name: code, host, method
        method = labels[2]
        if method in MUTATING and value:
            counts[method] = counts.get(method, 0) + value
    return counts


def phases(admin: Any, kind: str, namespace: str, names: Iterable[str]) -> dict[str, Any]:
    return {name: status_of(admin, kind, name, namespace).get("phase") for name in names}


def phase_series() -> dict[tuple[str, ...], float]:
    return {
        (name, candidate): 1.0 if candidate == phase else 0.0
        for name, phase in EXPECTED_PHASES.items()
        for candidate in ISVC_PHASES
    }


async def test_a_restarted_controller_reports_the_state_gauges_at_once_without_writing(
    operator: RunningController, full_namespace: str, tmp_path: Path
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("hf"), namespace=ns)
    admin.create(hf_model("cuda", hardware={"accelerator": "cuda"}), namespace=ns)
    admin.create(model("claim", source="pvc://no-such-claim/model.gguf"), namespace=ns)
    await gpus_idle(admin)
    holder = isvc("holder", modelRef="cuda", skipModelInit=True, resources={"gpu": 2}, priority="high")
    admin.create(holder, namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "holder", ns, "Ready"), what="holder Ready")
    services: list[dict[str, Any]] = [
        isvc("cpu", modelRef="hf", skipModelInit=True, resources={"cpu": "500m", "memory": "512Mi"}),
        isvc("stopped", modelRef="hf", skipModelInit=True, replicas=0),
        isvc("waiting-a", modelRef="cuda", skipModelInit=True, resources={"gpu": 2}),
        isvc("waiting-b", modelRef="cuda", skipModelInit=True, resources={"gpu": 2}),
        isvc("orphan", modelRef="absent", skipModelInit=True),
        isvc("pending", modelRef="claim", skipModelInit=True),
    ]
    for service in services:
        admin.create(service, namespace=ns)
    try:
        await eventually_equal(
            lambda: {
                name: status_of(admin, "InferenceService", name, ns).get("phase") for name in EXPECTED_PHASES
            },
            EXPECTED_PHASES,
            within=90,
            what="every service settled",
        )
        await eventually_equal(
            lambda: phases(admin, "Model", ns, EXPECTED_MODELS),
            {"hf": "Ready", "cuda": "Ready", "claim": "Failed"},
            what="every Model settled",
        )
        await settled(operator.controllers.inference_services.controller)
        await writes_quiesce(operator)

        assert operator.cluster.controller_kubeconfig is not None
        with controller_process(operator.cluster.controller_kubeconfig, ns, tmp_path / "controller.log") as (
            metrics_url,
            readyz_url,
        ):
            await eventually(lambda: get(readyz_url) == "ok\n", within=60, what="the new process ready")
            scraped: list[str] = []

            def scrape_phases() -> dict[tuple[str, ...], float]:
                text = get(metrics_url) or ""
                scraped[:] = [text]
                return samples(text, "llmkube_inferenceservice_phase", ns)

            # Within seconds of its caches syncing, with no reconcile having written anything.
            await eventually_equal(scrape_phases, phase_series(), within=30, what="the phase gauge")
            text = scraped[0]
            assert samples(text, "llmkube_gpu_queue_depth") == {(): 2.0}
            assert samples(text, "llmkube_model_status", ns) == {
                (name, candidate): 1.0 if candidate == phase else 0.0
                for name, phase in EXPECTED_MODELS.items()
                for candidate in MODEL_PHASES
            }
            # the per-service gauges come from the same caches, as fresh
            assert samples(text, "llmkube_inferenceservice_gpus_per_replica", ns) == {
                ("cpu",): 0.0,
                ("holder",): 2.0,
                ("stopped",): 0.0,
                ("waiting-a",): 2.0,
                ("waiting-b",): 2.0,
                ("orphan",): 0.0,
                ("pending",): 0.0,
            }
            assert samples(text, "llmkube_inferenceservice_replicas", ns)[("cpu", "ready")] == 1.0
            assert mutating_requests(text) == {}, (tmp_path / "controller.log").read_text()[-4000:]
    finally:
        await delete_services_and_wait(operator, ns, pods_too=True)
