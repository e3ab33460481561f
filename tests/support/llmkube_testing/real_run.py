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
   the URL and a `curl` line that gets one (`served_sample`, shared with the other samples).

A ModelRouter (`tiny-router`) in front of the sample is applied and forwarded the same way, on
the serve port + 2: its pod runs `llmkube router` from the controller image the node imported.
"""

import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from llmkube_testing import images
from llmkube_testing.cluster import default_bin_dir
from llmkube_testing.node import NodeCluster, missing_prerequisites, node_tier_unavailable
from llmkube_testing.served_sample import ServedSample
from llmkube_testing.tiny_service import (
    model_server,
    model_url,
    tiny_llamacpp,
    tiny_router,
    write_model_files,
)

SAMPLE_NAME = "tiny-llama"
ROUTER_SAMPLE = "tiny-router"
#: the router's Service (plan/router/objects.py names it)
ROUTER_SERVICE = f"{ROUTER_SAMPLE}-router-proxy"
#: the router's pods run the controller image the node imported (no registry is reachable)
ROUTER_IMAGE = images.CONTROLLER.ref
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
        admin.apply(tiny_router(SAMPLE_NAMESPACE, ROUTER_SAMPLE, SAMPLE_NAME))
        self.sample = ServedSample(self.cluster, SAMPLE_NAME, SAMPLE_NAMESPACE, self.serve_port, self.out)
        self.url = self.sample.forward()
        self.router = ServedSample(
            self.cluster,
            ROUTER_SAMPLE,
            SAMPLE_NAMESPACE,
            self.serve_port + 2,
            self.out,
            kind="ModelRouter",
            service=ROUTER_SERVICE,
            model=SAMPLE_NAME,
        )
        self.router_url = self.router.forward()
        return self

    def announce_when_ready(self, timeout: float = 900.0) -> threading.Thread:
        return self.sample.announce_when_ready(SAMPLE_NAME, timeout)

    def announce_router_when_ready(self, timeout: float = 900.0) -> threading.Thread:
        return self.router.announce_when_ready(
            f"{ROUTER_SAMPLE} (a ModelRouter in front of {SAMPLE_NAME})", timeout
        )
