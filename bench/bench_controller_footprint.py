"""Memory and CPU of the real controller process, for its Deployment's requests, limit and probes.

Starts the full local control plane (kwok nodes run the pods), runs `llmkube controller` as a
separate process (the command the Deployment runs), and samples its RSS and CPU time from /proc:
idle on an empty cluster, while N InferenceServices (CPU llama.cpp, each with a Model) converge to
Ready, settled afterwards, and after a restart against the converged cluster (cache sync time).

Usage: .venv/bin/python bench/bench_controller_footprint.py [--services 100]
Prints one JSON object. Needs the binaries from hack/build-k8s.sh.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmkube_testing.cluster import LocalCluster
from llmkube_testing.rest import KubeRest, wait_for_crds, wait_until

from llmkube.api.crds import all_crds

API = "inference.llmkube.dev/v1alpha1"
NAMESPACE = "footprint"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


@dataclass
class Sampler:
    """RSS every 100 ms in a thread: the peak of a phase, not just its end."""

    pid: int
    peak: int = 0
    samples: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                value = rss_bytes(self.pid)
            except OSError:
                return
            self.peak = max(self.peak, value)
            self.samples.append(value)
            time.sleep(0.1)

    def reset(self) -> None:
        self.peak = 0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def start_controller(kubeconfig: Path, metrics_port: int, health_port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "llmkube"),
            "controller",
            f"--kubeconfig={kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{health_port}",
            "--log-format=json",
            "--log-level=warning",
            "--model-cache-path=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def ready(health_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def mib(value: float) -> float:
    return round(value / 2**20, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", type=int, default=100)
    args = parser.parse_args()
    result: dict[str, Any] = {"services": args.services}
    from llmkube_testing.cluster import free_port

    with LocalCluster("full") as cluster:
        admin = KubeRest.from_kubeconfig(cluster.kubeconfig)
        admin.apply_all(all_crds())
        wait_for_crds(admin, [crd["metadata"]["name"] for crd in all_crds()])
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

        metrics_port, health_port = free_port(), free_port()
        started = time.monotonic()
        controller = start_controller(cluster.kubeconfig, metrics_port, health_port)
        sampler = Sampler(controller.pid)
        try:
            wait_until(lambda: ready(health_port), timeout=120, what="the controller ready")
            result["start_to_ready_s"] = round(time.monotonic() - started, 2)
            time.sleep(5)
            result["idle_empty_rss_mib"] = mib(rss_bytes(controller.pid))
            cpu_before = cpu_seconds(controller.pid)

            sampler.reset()
            t0 = time.monotonic()
            for index in range(args.services):
                name = f"svc-{index}"
                admin.create(
                    {
                        "apiVersion": API,
                        "kind": "Model",
                        "metadata": {"name": name},
                        "spec": {"source": f"org/{name}"},
                    },
                    namespace=NAMESPACE,
                )
                admin.create(
                    {
                        "apiVersion": API,
                        "kind": "InferenceService",
                        "metadata": {"name": name},
                        "spec": {
                            "modelRef": name,
                            "skipModelInit": True,
                            "resources": {"cpu": "100m", "memory": "128Mi"},
                        },
                    },
                    namespace=NAMESPACE,
                )

            def all_ready() -> bool:
                items = admin.list(API, "InferenceService", NAMESPACE)
                return len(items) == args.services and all(
                    (item.get("status") or {}).get("phase") == "Ready" for item in items
                )

            wait_until(all_ready, timeout=900, interval=1.0, what="every service Ready")
            result["converge_s"] = round(time.monotonic() - t0, 1)
            result["converge_cpu_s"] = round(cpu_seconds(controller.pid) - cpu_before, 1)
            result["converge_peak_rss_mib"] = mib(sampler.peak)

            cpu_before, t1 = cpu_seconds(controller.pid), time.monotonic()
            time.sleep(30)
            result["settled_rss_mib"] = mib(rss_bytes(controller.pid))
            result["settled_cpu_millicores"] = round(
                1000 * (cpu_seconds(controller.pid) - cpu_before) / (time.monotonic() - t1)
            )
        finally:
            sampler.stop()
            controller.terminate()
            controller.wait(timeout=60)

        # A restart against the converged cluster: how long until /readyz, and the memory then.
        started = time.monotonic()
        controller = start_controller(cluster.kubeconfig, metrics_port, health_port)
        sampler = Sampler(controller.pid)
        try:
            wait_until(
                lambda: ready(health_port), timeout=120, interval=0.1, what="the restarted controller ready"
            )
            result["restart_to_ready_s"] = round(time.monotonic() - started, 2)
            time.sleep(10)
            result["restart_peak_rss_mib"] = mib(sampler.peak)
        finally:
            sampler.stop()
            controller.terminate()
            controller.wait(timeout=60)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
