"""`llmkube run` on a real node: the tiny llama.cpp sample really serves, from the user's shell.

Which local cluster `llmkube run` starts (`choose_run_tier`): the node tier where it can run (root
on Linux, its prerequisites built), else the kwok `full` tier, and it says which and why. On the
node tier (`TinyDemo`):

1. the model server and the tiny Model + InferenceService are applied (`tiny_service`);
2. a loopback port of this machine is forwarded to the InferenceService's Service (looked up per
   connection, so it follows the Service wherever the controller puts it), opened *before*
3. the calling thread joins the node's network namespace, so the controller that runs next in this
   process reaches in-cluster URLs (the Model's http source) the way an in-cluster one would;
4. a watcher thread waits for `Ready`, asks for a real completion through the Service, and prints
   the URL and a `curl` line that gets one.
"""

import json
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from llmkube.testing import images
from llmkube.testing.cluster import default_bin_dir
from llmkube.testing.node import NodeCluster, missing_prerequisites, node_tier_unavailable
from llmkube.testing.rest import RestError
from llmkube.testing.tiny_service import (
    chat_request,
    model_server,
    model_url,
    tiny_llamacpp,
    write_model_files,
)

SAMPLE_NAME = "tiny-llama"
SAMPLE_NAMESPACE = "default"
DEFAULT_SERVE_PORT = 18080


def choose_run_tier(requested: str, bin_dir: Path | None = None) -> tuple[str, str]:
    """("node" or "full", why). `requested` is auto, node or full."""
    if requested == "full":
        return "full", "the kwok `full` tier, as asked (--tier full): fake nodes, pods never really run"
    reason = node_tier_unavailable()
    if reason is None:
        missing = missing_prerequisites(bin_dir or default_bin_dir(), images.default_images_dir())
        if missing:
            reason = (
                f"the node tier's prerequisites are missing ({', '.join(missing)}; build: make node-prereqs)"
            )
    if reason is None:
        return "node", "a real node (kubelet + containerd in a private network namespace): root on Linux"
    if requested == "node":
        raise SystemExit(f"llmkube run --tier node: {reason}")
    return "full", f"the kwok `full` tier (fake nodes, pods never really run), because {reason}"


@dataclass
class TinyDemo:
    cluster: NodeCluster
    serve_port: int = DEFAULT_SERVE_PORT
    out: TextIO = sys.stdout

    def start(self) -> "TinyDemo":
        admin = self.cluster.admin()
        server = model_server(SAMPLE_NAMESPACE, write_model_files(self.cluster.workdir / "model-files"))
        for obj in server:
            admin.apply(obj)
        server_ip = admin.get("v1", "Service", server[1]["metadata"]["name"], SAMPLE_NAMESPACE)["spec"][
            "clusterIP"
        ]
        # The controller refuses the cluster's Service network as a model source unless allowed.
        self.model_host = server_ip
        for obj in tiny_llamacpp(SAMPLE_NAMESPACE, SAMPLE_NAME, model_url(server_ip)):
            admin.apply(obj)
        try:
            self.forward = self.cluster.forward(self._service_address, listen_port=self.serve_port)
        except OSError:  # the usual port is taken: any free one
            self.forward = self.cluster.forward(self._service_address)
        self.url = f"http://{self.forward.address}/v1/chat/completions"
        return self

    def _service_address(self) -> tuple[str, int] | None:
        try:
            service = self.cluster.admin().get("v1", "Service", SAMPLE_NAME, SAMPLE_NAMESPACE)
        except RestError:
            return None
        ports = service["spec"].get("ports") or [{}]
        return service["spec"]["clusterIP"], int(ports[0].get("port", 8080))

    def curl_line(self) -> str:
        body = json.dumps(chat_request("Hello, who are you?"), separators=(",", ":"))
        return f"curl -s {self.url} -H 'Content-Type: application/json' -d '{body}'"

    def announce_when_ready(self, timeout: float = 900.0) -> threading.Thread:
        """From a thread started by a thread inside the namespace: wait, prove, print."""
        thread = threading.Thread(
            target=self._announce, args=(timeout,), name="llmkube-run-ready", daemon=True
        )
        thread.start()
        return thread

    def _announce(self, timeout: float) -> None:
        t0 = time.monotonic()
        admin = self.cluster.admin()
        while time.monotonic() - t0 < timeout:
            isvc = admin.get_or_none(
                "inference.llmkube.dev/v1alpha1", "InferenceService", SAMPLE_NAME, SAMPLE_NAMESPACE
            )
            status = (isvc or {}).get("status") or {}
            if status.get("phase") == "Ready":
                break
            time.sleep(1)
        else:
            print(
                f"llmkube run: {SAMPLE_NAME} is not Ready after {timeout:.0f} s; see kubectl get isvc,pods",
                file=self.out,
            )
            return
        address = self._service_address()
        answer = first_completion(address) if address else None
        print(
            f"\n{SAMPLE_NAME} is Ready after {time.monotonic() - t0:.1f} s and answers on this machine:\n"
            f"  {self.curl_line()}\n" + (f"  -> {json.dumps(answer)}\n" if answer else ""),
            file=self.out,
            flush=True,
        )


def first_completion(address: tuple[str, int]) -> dict[str, Any] | None:
    request = urllib.request.Request(
        f"http://{address[0]}:{address[1]}/v1/chat/completions",
        data=json.dumps(chat_request()).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    for _ in range(30):  # readiness and kube-proxy's rules arrive within a second or two of each other
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body: dict[str, Any] = json.load(response)
                return body
        except OSError:
            time.sleep(1)
    return None
