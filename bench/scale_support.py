"""What the scale benchmarks share: a local API server that writes an audit log of mutating
requests, the workload (N Models + N CPU InferenceServices), an observer that watches it converge,
an operator process with its CPU and memory read from /proc, and the machine the figures came from.

Nothing here asserts anything: the benchmarks print and store what they measured.
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmkube_testing.cluster import CONTROLLER_USER, K8S_VERSION, LocalCluster, Tier, free_port
from llmkube_testing.rest import KubeRest, load_yaml_documents, wait_until

from llmkube.kube.cache import Change, Informer, keep_only
from llmkube.kube.resource import DEPLOYMENTS, SERVICES, Resource
from llmkube.kube.rest import ApiClient, load_client_config

API_GROUP = "inference.llmkube.dev"
API = f"{API_GROUP}/v1alpha1"
NAMESPACE = "bench"
ISVCS = Resource(API_GROUP, "v1alpha1", "inferenceservices", "InferenceService")
MODELS = Resource(API_GROUP, "v1alpha1", "models", "Model")
REPO = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MUTATING_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    verbs: ["get", "list", "watch"]
  - level: Metadata
"""


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the cluster ---------------------------------------------------------------------------------


class BenchCluster(LocalCluster):
    """The local control plane with room for 10,000+ Services (a /16 service range instead of the
    tests' /24) and an audit log of every mutating request (who, what, when)."""

    def __init__(self, tier: Tier = "api") -> None:
        super().__init__(tier, audit=True)

    @property
    def writes_log(self) -> Path:
        """The audit log (every user's mutating requests: the policy below)."""
        assert self.audit_log is not None
        return self.audit_log

    def _audit_args(self) -> list[str]:
        # Every user's writes, no reads: the cluster's own policy logs the controller's reads too
        # (at 10,000 services, every LIST page and watch), which costs the API server for nothing here.
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.writes_log}"]

    def _apiserver_args(self) -> list[str]:
        return [
            "--service-cluster-ip-range=10.0.0.0/16" if arg.startswith("--service-cluster-ip-range") else arg
            for arg in super()._apiserver_args()
        ]

    def _spawn(self, name: str, args: list[str], *, executable: Path | None = None) -> Any:
        if name == "kube-controller-manager":
            # Its default client rate limit (20 QPS) would bound how fast pods appear: not our figure.
            args = [*args, "--kube-api-qps=200", "--kube-api-burst=400"]
        return super()._spawn(name, args, executable=executable)


class AuditCounter:
    """Counts the mutating requests of one user in the API server's audit log, reading on from where
    it stopped the last time. The API server rotates its log at 100 MB (lumberjack's default when no
    --audit-log-maxsize is given: a long benchmark reaches it), renaming it to audit-<time>.log: the
    rest of the renamed file is read before the new one."""

    def __init__(self, path: Path, user: str = CONTROLLER_USER) -> None:
        self.path = path
        self.user = user
        self._offset = 0
        self._inode: int | None = None
        self.total = 0
        self.by_resource: Counter[str] = Counter()

    def read(self) -> int:
        """Read what was appended; returns the running total."""
        try:
            inode = self.path.stat().st_ino
        except FileNotFoundError:
            return self.total
        if self._inode is not None and inode != self._inode:
            rotated = [
                other
                for other in self.path.parent.glob(f"{self.path.stem}-*{self.path.suffix}")
                if other.stat().st_ino == self._inode
            ]
            for other in rotated:
                self._consume(other)
            self._offset = 0
        self._inode = inode
        self._consume(self.path)
        return self.total

    def _consume(self, path: Path) -> None:
        with path.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            event = json.loads(line)
            if event.get("user", {}).get("username") != self.user or event.get("verb") not in MUTATING_VERBS:
                continue
            ref = event.get("objectRef") or {}
            what = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            self.by_resource[f"{event['verb']} {what}"] += 1
            self.total += 1

    def settle(self, quiet: float = 1.0, limit: float = 15.0) -> int:
        """Read until nothing new arrived for ``quiet`` seconds (the log is written as requests end)."""
        deadline = time.monotonic() + limit
        last = self.read()
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self.read()
            if now == last:
                return now
            last = now
        return last


def rbac_documents(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every RBAC object in the files (directories: every *.yaml but kustomization.yaml)."""
    documents: list[dict[str, Any]] = []
    for path in paths:
        files = sorted(path.rglob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            if file.name == "kustomization.yaml":
                continue
            documents += [
                doc for doc in load_yaml_documents(file) if isinstance(doc, dict) and doc.get("kind")
            ]
    return documents


def bindings_for_bench_user(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bind every ClusterRole (cluster-wide) and Role (in its namespace) of an operator's RBAC to the
    identity the benchmark runs it as, whatever ServiceAccount its own bindings name."""
    subject = [{"kind": "User", "name": CONTROLLER_USER, "apiGroup": "rbac.authorization.k8s.io"}]
    bindings: list[dict[str, Any]] = []
    for doc in documents:
        name = doc["metadata"]["name"]
        if doc["kind"] == "ClusterRole":
            bindings.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": f"bench-{name}"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": subject,
                }
            )
        elif doc["kind"] == "Role":
            namespace = doc["metadata"].get("namespace", "default")
            bindings.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": f"bench-{name}", "namespace": namespace},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                    "subjects": subject,
                }
            )
    return bindings


def install(cluster: LocalCluster, crds: list[Path], rbac: list[Path]) -> KubeRest:
    """CRDs, the operator's RBAC bound to the benchmark's controller identity, and the namespaces."""
    admin = cluster.admin()
    crd_docs = [doc for doc in rbac_documents(crds) if doc.get("kind") == "CustomResourceDefinition"]
    admin.apply_all(crd_docs)
    admin.forget_discovery()
    wait_until(lambda: admin.get_text(f"/apis/{API}/models")[0] == 200, timeout=60, what="CRDs served")
    documents = rbac_documents(rbac)
    namespaces = {doc["metadata"].get("namespace") for doc in documents if doc["metadata"].get("namespace")}
    for namespace in sorted(namespaces | {NAMESPACE, "llmkube-system"}):
        admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    admin.apply_all(documents + bindings_for_bench_user(documents))
    return admin


# -- the workload ----------------------------------------------------------------------------------


def service_name(index: int) -> str:
    return f"svc-{index:05d}"


def model(index: int) -> dict[str, Any]:
    name = service_name(index)
    return {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"source": f"bench-org/{name}-GGUF"},  # a Hugging Face repo: resolved by the runtime
    }


def inference_service(index: int) -> dict[str, Any]:
    name = service_name(index)
    return {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": NAMESPACE},
        # skipModelInit: the runtime fetches the Hugging Face repo (no init container, no warning)
        "spec": {
            "modelRef": name,
            "contextSize": 4096,
            "skipModelInit": True,
            "resources": {"cpu": "1", "memory": "2Gi"},
        },
    }


async def admin_client(cluster: LocalCluster) -> ApiClient:
    return ApiClient.from_config(await load_client_config(cluster.kubeconfig))


async def bounded(jobs: Iterable[Callable[[], Any]], concurrency: int) -> None:
    """Run the coroutine factories with at most ``concurrency`` in flight."""
    semaphore = asyncio.Semaphore(concurrency)

    async def one(job: Callable[[], Any]) -> None:
        async with semaphore:
            await job()

    await asyncio.gather(*(one(job) for job in jobs))


async def create_workload(cluster: LocalCluster, count: int, concurrency: int = 16) -> float:
    """N Models and N InferenceServices (as a user would create them); returns the seconds it took."""
    started = time.perf_counter()
    async with await admin_client(cluster) as client:
        jobs: list[Callable[[], Any]] = []
        for index in range(count):
            jobs.append(lambda i=index: client.create(MODELS, model(i)))
            jobs.append(lambda i=index: client.create(ISVCS, inference_service(i)))
        await bounded(jobs, concurrency)
    return time.perf_counter() - started


# -- watching the workload converge ----------------------------------------------------------------


@dataclass
class Observation:
    """What the observer saw, updated from its watches."""

    deployments: set[str] = field(default_factory=set)
    services: set[str] = field(default_factory=set)
    isvc_phase: dict[str, str] = field(default_factory=dict)
    model_phase: dict[str, str] = field(default_factory=dict)
    #: name -> (contextSize, time the user's change was seen on the InferenceService watch)
    spec_seen: dict[str, tuple[int, float]] = field(default_factory=dict)
    #: name -> (contextSize found in the Deployment, time it was seen on the Deployment watch)
    deployment_seen: dict[str, tuple[int, float]] = field(default_factory=dict)


def _context_size_in(deployment: dict[str, Any]) -> int | None:
    """The context size a Deployment's server is started with (any operator: the number after a
    ctx-size flag, or in a CTX/CONTEXT environment variable)."""
    for container in ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get(
        "containers"
    ) or ():
        words = [str(word) for word in (container.get("command") or []) + (container.get("args") or [])]
        for index, word in enumerate(words):
            if "ctx-size" in word or "context" in word.lower():
                tail = (
                    word.split("=", 1)[1]
                    if "=" in word
                    else (words[index + 1] if index + 1 < len(words) else "")
                )
                if tail.isdigit():
                    return int(tail)
        for env in container.get("env") or ():
            if ("CTX" in env.get("name", "") or "CONTEXT" in env.get("name", "")) and str(
                env.get("value", "")
            ).isdigit():
                return int(env["value"])
    return None


class Observer:
    """Watches the benchmark namespace (InferenceServices, Models, Deployments, Services) through
    llmkube's informer, keeping only what convergence and latency need."""

    def __init__(self, client: ApiClient) -> None:
        self.seen = Observation()
        self._client = client
        containers = ("spec", "template", "spec", "containers")
        self.informers = [
            self._watch(ISVCS, keep_only(("status", "phase"), ("spec", "contextSize")), self._isvc),
            self._watch(MODELS, keep_only(("status", "phase")), self._model),
            self._watch(DEPLOYMENTS, keep_only(containers), self._deployment),
            self._watch(SERVICES, keep_only(), self._service),
        ]

    def _watch(self, resource: Resource, transform: Any, handler: Callable[[Change], None]) -> Informer:
        informer = Informer(self._client, resource, namespace=NAMESPACE, transform=transform)
        informer.add_handler(handler)
        return informer

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    async def synced(self) -> None:
        await asyncio.gather(*(informer.wait_for_sync() for informer in self.informers))

    async def stop(self) -> None:
        await asyncio.gather(*(informer.stop() for informer in self.informers))

    @staticmethod
    def _name(change: Change) -> str:
        return str(change.obj["metadata"]["name"])

    def _isvc(self, change: Change) -> None:
        name = self._name(change)
        if change.new is None:
            self.seen.isvc_phase.pop(name, None)
            return
        phase = (change.new.get("status") or {}).get("phase")
        if phase:
            self.seen.isvc_phase[name] = phase
        size = (change.new.get("spec") or {}).get("contextSize")
        if isinstance(size, int) and self.seen.spec_seen.get(name, (None,))[0] != size:
            self.seen.spec_seen[name] = (size, time.perf_counter())

    def _model(self, change: Change) -> None:
        if change.new is not None and (phase := (change.new.get("status") or {}).get("phase")):
            self.seen.model_phase[self._name(change)] = phase

    def _deployment(self, change: Change) -> None:
        name = self._name(change)
        if change.new is None:
            self.seen.deployments.discard(name)
            return
        self.seen.deployments.add(name)
        size = _context_size_in(change.new)
        if size is not None and self.seen.deployment_seen.get(name, (None,))[0] != size:
            self.seen.deployment_seen[name] = (size, time.perf_counter())

    def _service(self, change: Change) -> None:
        if change.new is None:
            self.seen.services.discard(self._name(change))
        else:
            self.seen.services.add(self._name(change))

    def converged(self, count: int) -> bool:
        """Every service has a Deployment, a Service and a status phase; every Model a phase."""
        seen = self.seen
        return (
            len(seen.isvc_phase) >= count
            and len(seen.model_phase) >= count
            and len(seen.deployments) >= count
            and len(seen.services) >= count
        )


async def wait_for(predicate: Callable[[], bool], limit: float, what: str, interval: float = 0.05) -> float:
    """Seconds until ``predicate()`` holds, at most ``limit``."""
    started = time.perf_counter()
    while not predicate():
        if time.perf_counter() - started > limit:
            raise TimeoutError(f"{what} did not happen within {limit:.0f}s")
        await asyncio.sleep(interval)
    return time.perf_counter() - started


# -- the operator process --------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                found += [
                    int(child) for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                ]
    return found


def process_tree(pid: int) -> list[int]:
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending += _children(current)
    return tree


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process and its descendants."""
    total = 0.0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def rss_bytes(pid: int) -> int:
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            total += int(Path(f"/proc/{member}/statm").read_text().split()[1]) * PAGE
    return total


def memory_map(pid: int) -> dict[str, float]:
    """Where the process's resident memory lies, from /proc/PID/smaps (no help from the process).

    `heap`: glibc's main arena (brk; with one thread, all of malloc but its large blocks);
    `anonymous`: other anonymous mappings (CPython's small-object arenas, which the kernel merges
    when adjacent, malloc's own mappings of large blocks, stacks); `files`: code and data of the
    interpreter and its libraries. MiB each, plus the process's thread count (each thread that
    allocates may get an arena of its own).
    """
    found = {"heap": 0, "anonymous": 0, "files": 0}
    name = ""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
            head = line.split(None, 5)
            if "-" in head[0] and not head[0].endswith(":"):
                name = head[5].strip() if len(head) > 5 else ""
            elif head[0] == "Rss:":
                kind = "heap" if name == "[heap]" else "files" if name.startswith("/") else "anonymous"
                found[kind] += int(head[1])
    threads = 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
    return {**{key: round(kib / 1024, 1) for key, kib in found.items()}, "threads": threads}


def peak_rss_bytes(pid: int) -> int:
    """VmHWM: the kernel's own high-water mark of resident memory, summed over the tree."""
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
    return total


@dataclass
class OperatorSpec:
    """An operator to measure: a command line with {kubeconfig}, {metrics_port}, {health_port}
    placeholders, its CRDs and RBAC (files or directories), and where it reports readiness."""

    name: str
    command: str
    crds: list[Path]
    rbac: list[Path]
    ready_url: str = "http://127.0.0.1:{health_port}/readyz"
    metrics_url: str = "http://127.0.0.1:{metrics_port}/metrics"
    #: what stops it (a profiler wrapped around it writes its output on SIGINT, not SIGTERM)
    stop_signal: signal.Signals = signal.SIGTERM


def compile_bytecode(package: Path) -> None:
    """Write the package's .pyc files now, as pip does when it installs the wheel (the image's case).

    Without this a checkout's changed modules are compiled again at every start of the measured
    process whenever PYTHONDONTWRITEBYTECODE is set (a developer's shell may set it; the image sets
    it too, but holds the modules pip compiled): the start-up CPU would measure the bytecode
    compiler (~0.1-0.4 s), not the controller."""
    if not compileall.compile_dir(package, quiet=1):
        raise SystemExit(f"cannot compile {package}")


def llmkube_operator() -> OperatorSpec:
    compile_bytecode(REPO / "llmkube")
    executable = Path(sys.executable).parent / "llmkube"
    return OperatorSpec(
        name="llmkube",
        command=(
            f"{executable} controller --kubeconfig={{kubeconfig}} "
            "--metrics-bind-address=127.0.0.1:{metrics_port} "
            "--health-probe-bind-address=127.0.0.1:{health_port} "
            "--log-format=json --log-level=warning --model-cache-path="
        ),
        crds=[REPO / "manifests" / "crd"],
        rbac=[REPO / "manifests" / "rbac"],
    )


class RunningOperator:
    def __init__(self, spec: OperatorSpec, kubeconfig: Path, log: Path, start: str = "first") -> None:
        self.spec = spec
        self.metrics_port, self.health_port = free_port(), free_port()
        ports = {
            "kubeconfig": str(kubeconfig),
            "metrics_port": self.metrics_port,
            "health_port": self.health_port,
            "start": start,
        }
        self.ready_url = spec.ready_url.format(**ports)
        self.metrics_url = spec.metrics_url.format(**ports)
        self.started = time.perf_counter()
        handle = log.open("ab")
        self.process = subprocess.Popen(
            shlex.split(spec.command.format(**ports)),
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        handle.close()

    @property
    def pid(self) -> int:
        return self.process.pid

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.ready_url, timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def reconciles(self) -> int | None:
        """controller_runtime_reconcile_total, summed (None when the metrics cannot be read)."""
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return None
        total = 0.0
        for line in text.splitlines():
            if line.startswith("controller_runtime_reconcile_total{"):
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    def stop(self, timeout: float = 60.0) -> None:
        if self.process.poll() is None:
            # The whole session: a wrapper (a profiler) and the operator under it.
            os.killpg(self.process.pid, self.spec.stop_signal)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# -- where the figures come from -------------------------------------------------------------------


def machine_info(cluster: LocalCluster | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "kubernetes": K8S_VERSION,
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        # The controller's settings from the environment (e.g. LLMKUBE_WORKERS): an A/B run says so.
        "llmkube_environment": {
            key: value for key, value in os.environ.items() if key.startswith("LLMKUBE_")
        },
    }
    with contextlib.suppress(subprocess.CalledProcessError, OSError):
        info["llmkube_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        # Uncommitted changes measured: the commit alone does not name the code.
        info["llmkube_dirty"] = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    if cluster is not None:
        with contextlib.suppress(Exception):
            info["kube_apiserver"] = json.loads(cluster.admin().get_text("/version")[1]).get("gitVersion")
    return info


def save_result(name: str, result: dict[str, Any]) -> Path:
    directory = REPO / "bench" / "results"
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


__all__ = [
    "API",
    "NAMESPACE",
    "AuditCounter",
    "BenchCluster",
    "Observer",
    "OperatorSpec",
    "RunningOperator",
    "Tier",
    "create_workload",
    "install",
    "llmkube_operator",
    "machine_info",
    "progress",
    "save_result",
]
