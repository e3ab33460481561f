"""The custom metrics chain of `spec.autoscaling`, as real processes beside the node tier:

    llama-server --metrics  <-  Prometheus (hack/build-tools.sh) scraping with
                                manifests/monitoring/prometheus-scrape-config.yaml
                            <-  prometheus-adapter (hack/build-tools.sh) with the rule of
                                manifests/monitoring/prometheus-adapter-config.yaml
                            <-  the API server's aggregation layer (APIService
                                v1beta1.custom.metrics.k8s.io)  <-  the HorizontalPodAutoscaler

Both processes run on this machine inside the node's network namespace (pod addresses live only
there); the adapter is registered as an APIService whose Service has no selector and one endpoint,
the node's address, where the API server (inside the same namespace) dials it. Its serving
certificate is signed by the cluster CA, which is the APIService's caBundle.

`MetricsStack(node).start()` ... `.stop()` (or `with`): the stop deletes the APIService before the
adapter goes, so discovery never lists an API nobody serves.
"""

import base64
import json
import os
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from llmkube_testing import CHECKOUT
from llmkube_testing.cluster import MissingBinaryError, free_port
from llmkube_testing.node import NodeCluster
from llmkube_testing.pki import issue_certificate
from llmkube_testing.rest import RestError, condition_true, wait_until


def default_tools_bin() -> Path:
    """Where hack/build-tools.sh puts what it builds (as tests/tools.py finds it)."""
    if explicit := os.environ.get("LLMKUBE_TOOLS_BIN"):
        return Path(explicit)
    cache = os.environ.get("LLMKUBE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "llmkube"
    )
    return Path(cache) / "tools" / "bin"


REPOSITORY = CHECKOUT
MONITORING = REPOSITORY / "manifests" / "monitoring"
SCRAPE_CONFIG = MONITORING / "prometheus-scrape-config.yaml"
ADAPTER_CONFIG = MONITORING / "prometheus-adapter-config.yaml"
ADAPTER_NAME = "prometheus-adapter"
ADAPTER_NAMESPACE = "custom-metrics"
API_SERVICE = "v1beta1.custom.metrics.k8s.io"
CUSTOM_METRICS = "/apis/custom.metrics.k8s.io/v1beta1"
# What the test asks of the chain: a sample every 2 s and a new pod's series found within 5 s
# (the shipped scrape config says 30 s, the adapter's default re-list is 10 minutes).
SCRAPE_INTERVAL = "2s"
RELIST_INTERVAL = "5s"


def scrape_config(kubeconfig: Path, interval: str = SCRAPE_INTERVAL) -> dict[str, Any]:
    """prometheus.yml: the shipped job, its pods discovered through `kubeconfig`, every `interval`."""
    shipped: dict[str, Any] = yaml.safe_load(SCRAPE_CONFIG.read_text())
    jobs = []
    for job in shipped["scrape_configs"]:
        discovery = [{**sd, "kubeconfig_file": str(kubeconfig)} for sd in job["kubernetes_sd_configs"]]
        jobs.append({**job, "scrape_interval": interval, "kubernetes_sd_configs": discovery})
    return {"global": {"scrape_interval": interval, "evaluation_interval": interval}, "scrape_configs": jobs}


def adapter_rules() -> str:
    """The adapter's --config: the ConfigMap's config.yaml, as shipped."""
    configmap: dict[str, Any] = yaml.safe_load(ADAPTER_CONFIG.read_text())
    rules: str = configmap["data"]["config.yaml"]
    return rules


def registration(node_ip: str, port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """The objects that make the API server proxy custom.metrics.k8s.io to node_ip:port."""
    meta = {"name": ADAPTER_NAME, "namespace": ADAPTER_NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ADAPTER_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": meta,
            "subsets": [{"addresses": [{"ip": node_ip}], "ports": [{"name": "https", "port": port}]}],
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": API_SERVICE},
            "spec": {
                "group": "custom.metrics.k8s.io",
                "version": "v1beta1",
                "service": {"name": ADAPTER_NAME, "namespace": ADAPTER_NAMESPACE, "port": 443},
                "caBundle": base64.b64encode(ca_bundle).decode(),
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    ]


def pods_metric_path(namespace: str, metric: str, selector: str = "") -> str:
    """What the HPA controller asks for a Pods metric (and `kubectl get --raw` shows)."""
    path = f"{CUSTOM_METRICS}/namespaces/{namespace}/pods/*/{urllib.parse.quote(metric, safe=':')}"
    return f"{path}?labelSelector={urllib.parse.quote(selector)}" if selector else path


class MetricsStack:
    def __init__(self, node: NodeCluster, *, tools: Path | None = None) -> None:
        self.node = node
        self.prometheus = (tools or default_tools_bin()) / "prometheus"
        self.adapter = (tools or default_tools_bin()) / ADAPTER_NAME
        self.dir = node.workdir / "metrics-stack"
        self.prometheus_port = free_port()
        self.adapter_port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    def __enter__(self) -> "MetricsStack":
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> "MetricsStack":
        missing = [str(p) for p in (self.prometheus, self.adapter) if not os.access(p, os.X_OK)]
        if missing:
            raise MissingBinaryError(
                f"the metrics stack is missing {', '.join(missing)}: build them with make tools "
                "(or bash hack/build-tools.sh prometheus, then prometheus-adapter)"
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        config = self.dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(scrape_config(self.node.kubeconfig), sort_keys=False))
        self._spawn(
            "prometheus",
            [
                str(self.prometheus),
                f"--config.file={config}",
                f"--storage.tsdb.path={self.dir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.prometheus_port}",
            ],
        )
        rules = self.dir / "adapter-config.yaml"
        rules.write_text(adapter_rules())
        node_ip = self.node.layout.node_ip
        pki = self.node._pki
        assert pki is not None, "the node cluster is not started"
        cert, key = issue_certificate(
            pki,
            ADAPTER_NAME,
            common_name=ADAPTER_NAME,
            server_names=(f"{ADAPTER_NAME}.{ADAPTER_NAMESPACE}.svc",),
            server_ips=(node_ip,),
        )
        kubeconfig = str(self.node.kubeconfig)
        self._spawn(
            ADAPTER_NAME,
            [
                str(self.adapter),
                f"--secure-port={self.adapter_port}",
                f"--bind-address={node_ip}",
                f"--tls-cert-file={cert}",
                f"--tls-private-key-file={key}",
                f"--lister-kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--prometheus-url={self.prometheus_url}",
                f"--metrics-relist-interval={RELIST_INTERVAL}",
                f"--config={rules}",
                "--v=2",
            ],
        )
        admin = self.node.admin()
        for obj in registration(node_ip, self.adapter_port, pki.ca_cert.read_bytes()):
            admin.apply(obj)
        wait_until(self._available, timeout=90, interval=0.5, what=f"APIService {API_SERVICE} Available")
        return self

    def _spawn(self, name: str, args: list[str]) -> None:
        with (self.dir / f"{name}.log").open("ab") as log:
            self.processes.append(
                subprocess.Popen(
                    args,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.dir,
                    preexec_fn=self.node.network.child_setup(),
                    start_new_session=True,
                )
            )

    def _check_alive(self) -> None:
        for process in self.processes:
            if process.poll() is not None:
                name = Path(str(process.args[0])).name  # type: ignore[index]
                log = self.dir / f"{name}.log"  # the binaries are named as their logs
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with code {process.returncode}; {log}:\n{tail}")

    def _available(self) -> bool:
        self._check_alive()
        service = self.node.admin().get_or_none("apiregistration.k8s.io/v1", "APIService", API_SERVICE)
        return service is not None and condition_true(service, "Available")

    def custom_metric(self, path: str) -> dict[str, Any] | None:
        """GET on the custom metrics API through the API server (what the HPA reads); None if 404."""
        status, body = self.node.admin().get_text(path)
        if status == 404:
            return None
        if status != 200:
            raise RestError(status, "GET", path, body)
        found: dict[str, Any] = json.loads(body)
        return found

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query on Prometheus (from inside the node's network)."""
        url = f"{self.prometheus_url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"

        def get() -> Any:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())

        reply = self.node.network.run_inside(get, timeout=15)
        result: list[dict[str, Any]] = reply["data"]["result"]
        return result

    def stop(self) -> None:
        admin = self.node.admin()
        # The APIService first: while it is listed and nothing serves it, discovery is incomplete
        # for every client (kubectl, the controller, the namespace controller).
        admin.delete("apiregistration.k8s.io/v1", "APIService", API_SERVICE)
        admin.delete("v1", "Namespace", ADAPTER_NAMESPACE)
        wait_until(
            lambda: admin.get_or_none("v1", "Namespace", ADAPTER_NAMESPACE) is None,
            timeout=60,
            interval=0.5,
            what=f"namespace {ADAPTER_NAMESPACE} gone",
        )
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
