"""A sample of `llmkube run` reached from the user's shell: a loopback port of this machine forwarded
to its InferenceService's Service, and a watcher thread that waits for `Ready`, asks for a real
completion and prints the `curl` line that gets one. Shared by every sample `llmkube run` starts
(`real_run.TinyDemo`, `metal_demo.MetalDemo`), so they report the same way."""

import base64
import json
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import RestError
from llmkube_testing.tiny_service import chat_request

API = "inference.llmkube.dev/v1alpha1"


@dataclass
class ServedSample:
    """`name` in `namespace`, forwarded to `serve_port` of this machine (any free port when taken).
    `gone` says, when the thing serving it has stopped, why (None while it runs): the watcher stops
    waiting then."""

    cluster: NodeCluster
    name: str
    namespace: str
    serve_port: int
    out: TextIO = sys.stdout
    gone: Callable[[], str | None] = field(default=lambda: None)
    url: str = ""
    #: what `name` is (InferenceService or ModelRouter: its status.phase says Ready)
    kind: str = "InferenceService"
    #: its Service, when not named like it (a ModelRouter's is `<name>-router-proxy`)
    service: str = ""
    #: the `model` of the requests (a router routes by it; a service ignores it)
    model: str | None = None
    #: a metal service's server key (its host server asks for it), read once it is Ready
    key: str = ""

    def forward(self) -> str:
        """Opened before the calling thread joins the node's network namespace; the Service is
        looked up per connection, so the forward follows it wherever the controller puts it."""
        try:
            forward = self.cluster.forward(self.service_address, listen_port=self.serve_port)
        except OSError:  # the usual port is taken: any free one
            forward = self.cluster.forward(self.service_address)
        self.url = f"http://{forward.address}/v1/chat/completions"
        return self.url

    def service_address(self) -> tuple[str, int] | None:
        try:
            service = self.cluster.admin().get("v1", "Service", self.service or self.name, self.namespace)
        except RestError:
            return None
        ports = service["spec"].get("ports") or [{}]
        return service["spec"]["clusterIP"], int(ports[0].get("port", 8080))

    def body(self) -> dict[str, Any]:
        return {**({"model": self.model} if self.model else {}), **chat_request("Hello, who are you?")}

    def curl_line(self) -> str:
        body = json.dumps(self.body(), separators=(",", ":"))
        authorization = f" -H 'Authorization: Bearer {self.key}'" if self.key else ""
        return f"curl -s {self.url} -H 'Content-Type: application/json'{authorization} -d '{body}'"

    def read_key(self) -> str:
        """A metal service's server key (plan/inferenceservice/server_key.py), "" for others."""
        if self.kind != "InferenceService":
            return ""
        secret = self.cluster.admin().get_or_none("v1", "Secret", f"{self.name}-server-key", self.namespace)
        encoded = ((secret or {}).get("data") or {}).get("key")
        return base64.b64decode(encoded).decode() if encoded else ""

    def announce_when_ready(self, what: str, timeout: float = 900.0, served_by: str = "") -> threading.Thread:
        """From a thread started by a thread inside the node's namespace (the ClusterIP is reached
        from there): wait for Ready, prove it with a completion, print that `what` answers and how
        (`served_by`: ", served by ...," when it is not the cluster's pods)."""
        thread = threading.Thread(
            target=self._announce,
            args=(what, timeout, served_by),
            name=f"llmkube-run-{self.name}",
            daemon=True,
        )
        thread.start()
        return thread

    def _announce(self, what: str, timeout: float, served_by: str) -> None:
        t0 = time.monotonic()
        if (why := self._wait_ready(timeout)) is not None:
            print(f"llmkube run: {why}", file=self.out, flush=True)
            return
        self.key = self.read_key()
        address = self.service_address()
        answer = first_completion(address, self.body(), key=self.key) if address else None
        print(
            f"\n{what} is Ready after {time.monotonic() - t0:.1f} s{served_by} and answers on this machine:\n"
            f"  {self.curl_line()}\n" + (f"  -> {json.dumps(answer)}\n" if answer else ""),
            file=self.out,
            flush=True,
        )

    def _wait_ready(self, timeout: float) -> str | None:
        """None once Ready, else why it is not."""
        admin = self.cluster.admin()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (why := self.gone()) is not None:
                return why
            found = admin.get_or_none(API, self.kind, self.name, self.namespace)
            if ((found or {}).get("status") or {}).get("phase") == "Ready":
                return None
            time.sleep(1)
        see = f"kubectl get isvc,mr,pods -n {self.namespace}"
        return f"{self.name} is not Ready after {timeout:.0f} s; see {see}"


def first_completion(
    address: tuple[str, int], body: dict[str, Any] | None = None, *, key: str = ""
) -> dict[str, Any] | None:
    authorization = {"Authorization": f"Bearer {key}"} if key else {}
    request = urllib.request.Request(
        f"http://{address[0]}:{address[1]}/v1/chat/completions",
        data=json.dumps(body or chat_request()).encode(),
        headers={"Content-Type": "application/json", **authorization},
        method="POST",
    )
    for _ in range(30):  # readiness and kube-proxy's rules arrive within a second or two of each other
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer: dict[str, Any] = json.load(response)
                return answer
        except OSError:
            time.sleep(1)
    return None
