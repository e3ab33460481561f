"""`llmkube run --with-agent` on a real node: a metal sample served by a host agent on this machine.

Beside the tiny llama.cpp sample (`real_run.TinyDemo`, whose model server it shares), it applies
`tiny-metal`, a Model whose accelerator is `metal` and its InferenceService: the controller gives it
a Service without a selector and no pods, and waits for an agent. The agent is `llmkube agent`,
started here as a process of this machine in the node's network namespace (beside the kubelet, not
in a pod), under its own identity (manifests/agent/rbac.yaml and a token for it), advertising the
node's address and running the node image's llama-server natively. kube-proxy routes the Service's
ClusterIP to it, and a loopback port of this machine is forwarded to that Service, as for the other
sample. The agent's log goes to `<logs>/agent.log`; it stops with the run (`--stop-on-exit`: its
server goes with it).
"""

import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import IO, Any, TextIO

from llmkube_testing import CHECKOUT
from llmkube_testing.host_llama_server import extract, runnable
from llmkube_testing.identities import service_account_kubeconfig
from llmkube_testing.node import NodeCluster
from llmkube_testing.real_run import SAMPLE_NAMESPACE
from llmkube_testing.rest import load_yaml_documents
from llmkube_testing.served_sample import API, ServedSample
from llmkube_testing.tiny_service import model_url

METAL_SAMPLE = "tiny-metal"
AGENT_NAME = "this-host"
AGENT_RBAC = CHECKOUT / "manifests" / "agent" / "rbac.yaml"


class MetalDemoError(RuntimeError):
    pass


def metal_sample(namespace: str, source: str) -> list[dict[str, Any]]:
    model = {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": METAL_SAMPLE, "namespace": namespace},
        "spec": {"source": source, "format": "gguf", "hardware": {"accelerator": "metal"}},
    }
    isvc = {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": METAL_SAMPLE, "namespace": namespace},
        "spec": {"modelRef": METAL_SAMPLE, "contextSize": 256, "endpoint": {"port": 8080}},
    }
    return [model, isvc]


@dataclass
class MetalDemo:
    cluster: NodeCluster
    model_host: str  # the ClusterIP of the sample's model server
    serve_port: int
    out: TextIO = sys.stdout
    url: str = ""
    agent: "subprocess.Popen[bytes] | None" = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> "MetalDemo":
        binary = extract()  # from the node's llama.cpp image: raises when it is not built
        if reason := runnable(binary):
            raise MetalDemoError(reason)
        admin = self.cluster.admin()
        for doc in load_yaml_documents(AGENT_RBAC):
            admin.apply(doc)
        agent_dir = self.cluster.workdir / "agent"
        agent_dir.mkdir(exist_ok=True)
        identity = service_account_kubeconfig(
            self.cluster.kubeconfig,
            "llmkube-system",
            "llmkube-agent",
            agent_dir / "agent.kubeconfig",
            seconds=24 * 3600,
        )
        for obj in metal_sample(SAMPLE_NAMESPACE, model_url(self.model_host)):
            admin.apply(obj)
        self._log = (self.cluster.logs_dir / "agent.log").open("ab")
        self.agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llmkube.cli",
                "agent",
                f"--kubeconfig={identity}",
                f"--name={AGENT_NAME}",
                f"--advertise-address={self.cluster.layout.node_ip}",
                f"--llama-server={binary}",
                f"--state-dir={agent_dir / 'state'}",
                f"--model-cache-dir={agent_dir / 'cache'}",
                f"--model-source-allowed-hosts={self.model_host}",
                f"--namespace={SAMPLE_NAMESPACE}",
                "--metrics-bind-address=127.0.0.1:0",
                "--health-probe-bind-address=0",
                "--stop-on-exit",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            preexec_fn=self.cluster.network.child_setup(),
        )
        self.sample = ServedSample(
            self.cluster, METAL_SAMPLE, SAMPLE_NAMESPACE, self.serve_port, self.out, gone=self._agent_gone
        )
        self.url = self.sample.forward()
        return self

    def _agent_gone(self) -> str | None:
        if self.agent is None or self.agent.poll() is None:
            return None
        return f"the host agent exited ({self.agent.returncode}); see {self.cluster.logs_dir / 'agent.log'}"

    def announce_when_ready(self, timeout: float = 900.0) -> threading.Thread:
        log = self.cluster.logs_dir / "agent.log"
        by = f", served by the host agent {AGENT_NAME!r} (log: {log}),"
        return self.sample.announce_when_ready(f"{METAL_SAMPLE} (metal)", timeout, served_by=by)

    def stop(self, within: float = 30) -> None:
        """SIGTERM: with --stop-on-exit the agent stops its server and removes its slice first."""
        if self.agent is not None and self.agent.poll() is None:
            self.agent.terminate()
            try:
                self.agent.wait(timeout=within)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait()
        if self._log is not None:
            self._log.close()
