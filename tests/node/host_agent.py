"""`llmkube agent` on the host side of the node tier: a real agent process in the node's network
namespace but outside the kubelet (no pod, no container), advertising the node's address, so
kube-proxy's rules route a metal service's ClusterIP to the llama-server it runs natively."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

from llmkube_testing.node import NodeCluster
from node_support import metric_samples


def free_port_inside(node: NodeCluster) -> int:
    def pick() -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])

    return node.network.run_inside(pick)


class HostAgent:
    """The agent as an OS process inside the node's network: its JSON log lines collected, its
    metrics read from inside (it listens on the namespace's loopback)."""

    def __init__(self, node: NodeCluster, args: list[str]) -> None:
        self.node = node
        self.args = args  # what a second agent on the same host starts with
        self.metrics_port = free_port_inside(node)
        self.records: list[dict[str, Any]] = []
        self.other: list[str] = []
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llmkube.cli",
                "agent",
                *args,
                f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
                "--health-probe-bind-address=0",
                "--log-format=json",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=node.network.child_setup(),
        )
        self._reader = threading.Thread(target=self._read, name="agent-log", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            text = line.decode(errors="replace").rstrip()
            with self._lock:
                try:
                    self.records.append(json.loads(text))
                except ValueError:
                    self.other.append(text)

    def logged(self, event: str, **fields: Any) -> list[dict[str, Any]]:
        with self._lock:
            records = list(self.records)
        return [r for r in records if r.get("msg") == event and all(r.get(k) == v for k, v in fields.items())]

    def sample(self, metric: str, **labels: str) -> float:
        def scrape() -> str:
            url = f"http://127.0.0.1:{self.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as answer:
                return str(answer.read().decode())

        samples = metric_samples(self.node.network.run_inside(scrape), metric)
        return sum(v for got, v in samples if all(got.get(k) == want for k, want in labels.items()))

    def rss(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self, within: float = 30) -> int:
        """SIGTERM without --stop-on-exit: the agent exits and leaves its servers (and slices) as
        they are, as a host that went away would."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=within)
        self._reader.join(timeout=5)
        return code

    def tail(self, lines: int = 60) -> str:
        with self._lock:
            return "\n".join([json.dumps(r) for r in self.records[-lines:]] + self.other[-lines:])


def server_pids(binary: Path, directory: Path) -> list[int]:
    """The llama-server processes of this binary whose model is under `directory` (this test's
    agent cache: other checkouts on the machine run the same binary)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
            if os.readlink(entry / "exe") == str(binary) and str(directory) in command:
                found.append(int(entry.name))
    return sorted(found)


def kill_servers(binary: Path, directory: Path) -> None:
    for pid in server_pids(binary, directory):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
