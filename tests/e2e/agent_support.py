"""The host agent in the e2e suite: `llmkube agent` as a real process (its own identity, bound to
nothing but manifests/agent/rbac.yaml), the llama-server the node tier builds (run natively), the
tiny GGUF served over HTTP on loopback, and the way in: an address of this machine that is not
loopback (what the agent advertises)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.server
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from e2e_support import API, eventually
from llmkube_testing.fileserver import ModelFileHandler
from llmkube_testing.host_llama_server import extracted_path, runnable
from llmkube_testing.identities import service_account_kubeconfig
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import KubeRest, load_yaml_documents
from llmkube_testing.tiny_gguf import write_tiny_gguf
from tools import without_build

ROOT = Path(__file__).resolve().parents[2]
AGENT_RBAC = ROOT / "manifests" / "agent" / "rbac.yaml"


def llama_server_binary() -> Path:
    """The node tier's llama-server, extracted for this host; skip (with the reason) without it."""
    path = extracted_path()
    if path is None or not path.is_file():
        without_build(
            "the host agent tests need llama-server, extracted from the node tier's image (make node-prereqs)"
        )
    if reason := runnable(path):
        pytest.skip(reason)
    return path


def advertise_address() -> str:
    """A non-loopback IPv4 address of this machine (the agent refuses loopback: no other host
    reaches it); skip where there is none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))  # no packet is sent: it only picks the route's source
            address = str(probe.getsockname()[0])
        except OSError:
            address = ""
    if not address or address.startswith("127."):
        pytest.skip("the host agent tests need a non-loopback IPv4 address on this machine")
    return address


def agent_kubeconfig(cluster: ClusterHandle, target: Path) -> Path:
    """The agent's ServiceAccount with exactly manifests/agent/rbac.yaml, and a kubeconfig of it."""
    apply_manifests(cluster, load_yaml_documents(AGENT_RBAC))
    return service_account_kubeconfig(cluster.kubeconfig, "llmkube-system", "llmkube-agent", target)


class ModelFiles:
    """The tiny GGUF (and whatever else a test puts there) over HTTP on 127.0.0.1, with ranges."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        write_tiny_gguf(directory / "tiny.gguf")
        handler = type("Handler", (ModelFileHandler,), {"directory": directory})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str = "tiny.gguf") -> str:
        return f"http://127.0.0.1:{self.server.server_port}/{name}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class AgentProcess:
    """`llmkube agent` as an OS process: JSON log lines collected, metrics scraped, signals."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    process: asyncio.subprocess.Process | None = None
    metrics_port: int = 0
    _reader: asyncio.Task[None] | None = None

    async def start(self) -> AgentProcess:
        self.metrics_port = free_port()
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "llmkube.cli",
            "agent",
            *self.args,
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address=0",
            "--log-format=json",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
        )
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        async for line in self.process.stderr:
            text = line.decode(errors="replace").rstrip()
            try:
                self.records.append(json.loads(text))
            except ValueError:
                self.other.append(text)

    @property
    def cache_dir(self) -> Path:
        return Path(next(a for a in self.args if a.startswith("--model-cache-dir=")).split("=", 1)[1])

    def rss(self) -> int:
        """The agent's resident memory (its own, not its servers'), in bytes."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def logged(self, event: str, **fields: Any) -> list[dict[str, Any]]:
        return [
            r for r in self.records if r.get("msg") == event and all(r.get(k) == v for k, v in fields.items())
        ]

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as answer:
            return str(answer.read().decode())

    def sample(self, metric: str, **labels: str) -> float:
        """The sum of the samples of `metric` with these labels (0 when there are none)."""
        from prometheus_client.parser import text_string_to_metric_families

        total = 0.0
        for family in text_string_to_metric_families(self.metrics()):
            for sample in family.samples:
                if sample.name == metric and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def writes(self) -> float:
        return sum(
            self.sample("rest_client_requests_total", method=m) for m in ("POST", "PATCH", "PUT", "DELETE")
        )

    async def stop(self, signum: int = signal.SIGTERM, within: float = 30) -> int:
        assert self.process is not None
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signum)
        code = await asyncio.wait_for(self.process.wait(), timeout=within)
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._reader, timeout=5)
        return code

    def tail(self, lines: int = 40) -> str:
        return "\n".join([json.dumps(r) for r in self.records[-lines:]] + self.other[-lines:])


def agent_args(
    kubeconfig: Path,
    *,
    name: str,
    address: str,
    llama_server: Path,
    state: Path,
    cache: Path,
    namespace: str | None = None,
    selector: str = "",
    extra: tuple[str, ...] = (),
) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--name={name}",
        f"--advertise-address={address}",
        f"--llama-server={llama_server}",
        f"--state-dir={state}",
        f"--model-cache-dir={cache}",
        # The tests' model files are on loopback, which the agent refuses by default.
        "--model-source-allowed-hosts=127.0.0.1",
        *([f"--namespace={namespace}"] if namespace else []),
        *([f"--service-selector={selector}"] if selector else []),
        *extra,
    ]


def metal_model(name: str, source: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": name},
        "spec": {"source": source, "format": "gguf", "hardware": {"accelerator": "metal"}, **spec},
    }


def metal_isvc(name: str, model: str, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": metadata,
        "spec": {"modelRef": model, "contextSize": 256, **spec},
    }


def agent_slices(admin: KubeRest, namespace: str, agent: str | None = None) -> list[dict[str, Any]]:
    selector = "llmkube.ai/managed-by=metal-agent" + (f",llmkube.ai/agent={agent}" if agent else "")
    return admin.list("discovery.k8s.io/v1", "EndpointSlice", namespace, label_selector=selector)


def served_endpoint(admin: KubeRest, namespace: str, service: str) -> tuple[str, int] | None:
    """The ready endpoint (address, port) of the service's agent slice, if one is ready."""
    for item in agent_slices(admin, namespace):
        if item["metadata"]["labels"].get("kubernetes.io/service-name") != service:
            continue
        for endpoint in item.get("endpoints") or ():
            if (endpoint.get("conditions") or {}).get("ready"):
                return endpoint["addresses"][0], item["ports"][0]["port"]
    return None


def server_key(admin: KubeRest, namespace: str, service: str) -> str:
    """The service's server key, as the router gets it: from the Secret the controller writes."""
    secret = admin.get("v1", "Secret", f"{service}-server-key", namespace)
    return base64.b64decode(secret["data"]["key"]).decode()


def chat(address: str, port: int, key: str | None, *, timeout: float = 60) -> dict[str, Any]:
    """One completion from the host's server, with the service's key (None: without one)."""
    body = json.dumps(
        {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4, "seed": 42, "temperature": 0}
    ).encode()
    authorization = {"Authorization": f"Bearer {key}"} if key else {}
    request = urllib.request.Request(
        f"http://{address}:{port}/v1/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", **authorization},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        result: dict[str, Any] = json.loads(answer.read())
        return result


async def served(admin: KubeRest, namespace: str, service: str, *, within: float = 120) -> tuple[str, int]:
    """Waits until the service is Ready (the controller says so) with a ready agent endpoint."""

    def ready() -> tuple[str, int] | None:
        status = (admin.get_or_none(API, "InferenceService", service, namespace) or {}).get("status") or {}
        endpoint = served_endpoint(admin, namespace, service.replace(".", "-"))
        return endpoint if status.get("phase") == "Ready" and endpoint else None

    result: tuple[str, int] = await eventually(
        ready, within=within, what=f"{service} Ready through the agent"
    )
    return result


def server_pids(binary: Path, directory: Path) -> list[int]:
    """The pids of the llama-server processes of this binary serving a model under `directory` (a
    test's agent cache: other tests, and other checkouts on the machine, run the same binary)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(entry / "exe") == str(binary) and str(directory) in " ".join(
                command_line(int(entry.name))
            ):
                found.append(int(entry.name))
    return sorted(found)


def command_line(pid: int) -> list[str]:
    return [part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]


def wait_pids(binary: Path, directory: Path, expected: int, *, within: float = 30) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        pids = server_pids(binary, directory)
        if len(pids) == expected:
            return pids
        time.sleep(0.2)
    raise TimeoutError(f"{expected} llama-server processes expected, found {server_pids(binary, directory)}")


def status(admin: KubeRest, name: str, namespace: str) -> dict[str, Any]:
    return (admin.get_or_none(API, "InferenceService", name, namespace) or {}).get("status") or {}


@contextlib.contextmanager
def model_files(directory: Path) -> Iterator[ModelFiles]:
    files = ModelFiles(directory)
    try:
        yield files
    finally:
        files.close()


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False
