"""A real local Kubernetes control plane, the way controller-runtime's envtest provides one.

tier "api":  etcd + kube-apiserver (RBAC on, service-account keys, token users).
tier "full": api + kube-controller-manager + kube-scheduler + kwok with fake nodes that
             advertise GPUs, so Deployments get pods that turn Ready, the scheduler reports
             `Insufficient nvidia.com/gpu`, and garbage collection deletes owned objects.
tier "node": api + controller-manager + scheduler + one real node (containerd, kubelet, kube-proxy)
             in a private network namespace: see `llmkube_testing.node.NodeCluster`.

Binaries come from `hack/build-k8s.sh` (built through the Go module proxy, cached outside the
repository). Everything runs on loopback ports in a temporary directory; `stop()` (also on
Ctrl-C and interpreter exit) tears it all down. A clean stop removes the directory (etcd data, PKI,
logs: up to 140 MB); when the run failed (`failed(why)`, an exception out of the `with` block, a
start that did not come up, an exit without `stop()`) it keeps the directory but the etcd data, and
with `keep_workdir` (`--keep-logs`, or LLMKUBE_KEEP_CLUSTER_DIR=1 for the test tiers) all of it;
either way stderr says where the logs are (`workdir_disposal` decides).
"""

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from llmkube_testing.node_cleanup import mounts_below
from llmkube_testing.pki import ClusterPKI, generate_pki
from llmkube_testing.rest import KubeRest, RestError, condition_true, wait_until

Tier = Literal["api", "full", "node"]

K8S_VERSION = "v1.37.2"
BUILD_COMMAND = "bash hack/build-k8s.sh"
API_BINARIES = ("etcd", "kube-apiserver")
CONTROL_PLANE_BINARIES = (*API_BINARIES, "kube-controller-manager", "kube-scheduler")
FULL_BINARIES = (*CONTROL_PLANE_BINARIES, "kwok")

ADMIN_USER = "llmkube-admin"
RESTRICTED_USER = "llmkube-restricted"
# A static-token identity named like the controller's service account, so RBAC written for the
# ServiceAccount (manifests/rbac) applies to it unchanged: least privilege proven with our own RBAC.
CONTROLLER_NAMESPACE = "llmkube-system"
CONTROLLER_SERVICE_ACCOUNT = "llmkube-controller"
CONTROLLER_USER = f"system:serviceaccount:{CONTROLLER_NAMESPACE}:{CONTROLLER_SERVICE_ACCOUNT}"

GPU_TAINT_VALUE = "present"

#: set (to anything but "" or "0") to keep every test cluster's directory, etcd data included
KEEP_ENV = "LLMKUBE_KEEP_CLUSTER_DIR"

#: asked at each stop whether the run this process serves has failed so far, with the reason
#: (the pytest plugin installs one that counts failed tests); None: only `failed` says so
run_failure: Callable[[], str | None] | None = None


def keep_requested(environ: dict[str, str] | None = None) -> bool:
    """LLMKUBE_KEEP_CLUSTER_DIR asks to keep every cluster's directory ("" and "0" do not)."""
    value = (os.environ if environ is None else environ).get(KEEP_ENV, "")
    return value not in ("", "0")


def workdir_disposal(*, failed: bool, keep: bool) -> tuple[str, ...]:
    """What to remove of a cluster's own temporary directory when it stops, as paths relative to it
    ("." is all of it): everything after a clean stop; the etcd data alone (the logs, PKI and
    kubeconfigs stay for whoever looks into the failure) when the run failed; nothing when keeping
    was asked for."""
    if keep:
        return ()
    if failed:
        return ("etcd",)
    return (".",)


class ClusterError(RuntimeError):
    pass


class MissingBinaryError(ClusterError):
    pass


def default_bin_dir() -> Path:
    if explicit := os.environ.get("LLMKUBE_K8S_BIN"):
        return Path(explicit)
    cache = os.environ.get("LLMKUBE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "llmkube"
    )
    return Path(cache) / f"k8s-{K8S_VERSION}" / "bin"


def check_binaries(bin_dir: Path, tier: Tier) -> None:
    names = {"api": API_BINARIES, "full": FULL_BINARIES, "node": CONTROL_PLANE_BINARIES}[tier]
    missing = [name for name in names if not os.access(bin_dir / name, os.X_OK)]
    if tier == "full" and not (bin_dir / "kwok-stages.yaml").is_file():
        missing.append("kwok-stages.yaml")
    if missing:
        raise MissingBinaryError(
            f"missing control-plane binaries in {bin_dir}: {', '.join(missing)}. "
            f"Build them with: {BUILD_COMMAND}  (or point LLMKUBE_K8S_BIN at a directory that has them)"
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class NodeSpec:
    """A kwok node. GPU nodes carry the usual `<resource>=present:NoSchedule` taint."""

    name: str
    gpus: int = 0
    gpu_resource: str = "nvidia.com/gpu"
    cpu: str = "32"
    memory: str = "256Gi"
    pods: str = "110"
    labels: dict[str, str] = field(default_factory=dict)

    def manifest(self) -> dict[str, object]:
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        taints: list[dict[str, str]] = []
        if self.gpus:
            capacity[self.gpu_resource] = str(self.gpus)
            taints.append({"key": self.gpu_resource, "value": GPU_TAINT_VALUE, "effect": "NoSchedule"})
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **self.labels,
                },
            },
            "spec": {"taints": taints} if taints else {},
            "status": {"capacity": capacity, "allocatable": capacity},
        }


# What `kubectl logs` shows for any kwok pod container (kwok runs no process to log anything),
# in the CRI log format kwok reads: <time> <stream> <F(ull)|P(artial)> <line>.
KWOK_POD_LOG = (
    "2026-01-01T00:00:00.000000000Z stdout F kwok: this pod runs no process; "
    "every container shows this fixed log\n"
    "2026-01-01T00:00:00.500000000Z stdout F llmkube-download: 1073741824 of 4294967296 bytes (25%)\n"
    "2026-01-01T00:00:01.000000000Z stdout F main: server is listening on http://0.0.0.0:8080 (stand-in)\n"
)

DEFAULT_NODES = (
    NodeSpec("kwok-cpu-0"),
    NodeSpec("kwok-gpu-0", gpus=2),
    NodeSpec("kwok-gpu-1", gpus=1),
)


try:  # loaded once in the parent: the child between fork and exec must not import or load anything
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def local_volume(name: str, path: Path) -> dict[str, object]:
    """A class-less hostPath volume: it binds claims that name no StorageClass."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"llmkube.dev/local-pool": "true"}},
        "spec": {
            "capacity": {"storage": "1Ti"},
            "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": str(path), "type": "DirectoryOrCreate"},
        },
    }


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it if the launching process dies for any reason,
    so a killed test run never leaves an API server behind."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class _Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


def _kubeconfig(server: str, ca: Path, user: str, token: str) -> str:
    import base64

    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "llmkube-local",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode(),
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "llmkube-local", "context": {"cluster": "llmkube-local", "user": user}}],
            "current-context": "llmkube-local",
        }
    )


class LocalCluster:
    """Start with `start()` (or a `with` block); stop with `stop()`. Not re-entrant."""

    def __init__(
        self,
        tier: Tier = "api",
        *,
        nodes: tuple[NodeSpec, ...] = DEFAULT_NODES,
        workdir: Path | None = None,
        bin_dir: Path | None = None,
        start_timeout: float = 90.0,
        volumes: int = 160,
        apiserver_args: tuple[str, ...] = (),
        audit: bool = False,
        keep_workdir: bool | None = None,
    ) -> None:
        self.tier: Tier = tier
        self.nodes = nodes if tier == "full" else ()
        self.bin_dir = bin_dir or default_bin_dir()
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix=f"llmkube-{tier}-"))
        self.start_timeout = start_timeout
        self.volumes = volumes if tier == "full" else 0
        self.components: list[_Component] = []
        self.etcd_port = free_port()
        self.api_port = free_port()
        self.kwok_port = free_port()
        self.server = f"https://127.0.0.1:{self.api_port}"
        self.etcd_endpoint = f"http://127.0.0.1:{self.etcd_port}"
        self.logs_dir = self.workdir / "logs"
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.restricted_kubeconfig = self.workdir / "restricted.kubeconfig"
        self.controller_kubeconfig = self.workdir / "controller.kubeconfig"
        self.startup_seconds: dict[str, float] = {}
        #: extra kube-apiserver flags (e.g. `--watch-cache=false` for tests that need etcd's own 410s)
        self.apiserver_args = apiserver_args
        #: extra kube-controller-manager flags (the node tier shortens the HPA's scale-down window)
        self.controller_manager_args: tuple[str, ...] = ()
        #: with `audit`, every request of the controller identity is written to `audit_log`
        self.audit_log: Path | None = self.workdir / "audit.log" if audit else None
        #: audit policy rules after the controller identity's, before "nothing else" (the node tier
        #: adds the pods' ServiceAccounts: a router's requests are made with its own token)
        self.audit_rules: tuple[dict[str, Any], ...] = ()
        #: keep the whole directory after the stop, even a clean one (None: LLMKUBE_KEEP_CLUSTER_DIR)
        self.keep_workdir = keep_requested() if keep_workdir is None else keep_workdir
        #: why the run this cluster served failed (`failed`): its directory is kept at the stop
        self.failure: str | None = None
        self._pki: ClusterPKI | None = None
        self._stopped = False

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> "LocalCluster":
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, *_: object) -> None:
        if exc_type is not None:
            self.failed(f"{exc_type.__name__}: {exc}" if str(exc) else exc_type.__name__)
        self.stop()

    def failed(self, why: str) -> None:
        """The run this cluster served failed: its directory (the logs) is kept at the stop, and
        stderr says where. The first reason given is the one reported."""
        if self.failure is None:
            self.failure = why

    def start(self) -> "LocalCluster":
        check_binaries(self.bin_dir, self.tier)
        atexit.register(self._stop_at_exit)
        t0 = time.monotonic()
        try:
            self._prepare()
            self._start_etcd()
            self._start_apiserver()
            self.startup_seconds["api"] = time.monotonic() - t0
            if self.tier == "full":
                self._start_full_tier()
                self.startup_seconds["full"] = time.monotonic() - t0
        except BaseException as error:
            self.print_logs()
            self.failed(f"the {self.tier} tier did not start: {error!r}")
            self.stop()
            raise
        return self

    def _stop_at_exit(self) -> None:
        self.failed("the process exited without stopping the cluster")
        self.stop()

    def stop(self) -> None:
        if self._stopped:
            return
        self._stop_components()
        self._dispose_workdir()

    def _stop_components(self) -> None:
        self._stopped = True
        # One at a time, last started first: an API server whose etcd is already gone waits out
        # its shutdown timeout instead of exiting at once.
        for component in reversed(self.components):
            if component.process.poll() is None:
                component.process.terminate()
            try:
                component.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                component.process.kill()
                component.process.wait()
        with contextlib.suppress(Exception):
            atexit.unregister(self._stop_at_exit)

    def _dispose_workdir(self) -> None:
        """Remove what `workdir_disposal` says of a directory this cluster made (one it was given
        is the caller's), never through a mount point left below it; say on stderr what is kept."""
        if not self._own_workdir or not self.workdir.exists():
            return
        if self.failure is None and run_failure is not None and (why := run_failure()):
            self.failed(why)
        removed = workdir_disposal(failed=self.failure is not None, keep=self.keep_workdir)
        mounted = _mounts_below(self.workdir)
        if mounted:
            removed = ()
        for relative in removed:
            shutil.rmtree(self.workdir / relative, ignore_errors=True)
        if removed == (".",):
            return
        if mounted:
            why = f"still mounted below it: {', '.join(mounted)}"
        elif self.failure is not None:
            why = self.failure
        else:
            why = f"kept as asked ({KEEP_ENV} or --keep-logs)"
        print(f"llmkube: kept {self.workdir} ({why}); component logs in {self.logs_dir}", file=sys.stderr)

    def admin(self) -> KubeRest:
        return KubeRest.from_kubeconfig(self.kubeconfig)

    def restricted(self) -> KubeRest:
        return KubeRest.from_kubeconfig(self.restricted_kubeconfig)

    # -- set-up steps -------------------------------------------------------------------------
    def _prepare(self) -> None:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self._pki = generate_pki(self.workdir / "pki")
        self._tokens = {
            ADMIN_USER: os.urandom(16).hex(),
            RESTRICTED_USER: os.urandom(16).hex(),
            CONTROLLER_USER: os.urandom(16).hex(),
        }
        sa_groups = f"system:serviceaccounts,system:serviceaccounts:{CONTROLLER_NAMESPACE}"
        (self.workdir / "tokens.csv").write_text(
            f'{self._tokens[ADMIN_USER]},{ADMIN_USER},uid-admin,"system:masters"\n'
            f"{self._tokens[RESTRICTED_USER]},{RESTRICTED_USER},uid-restricted\n"
            f'{self._tokens[CONTROLLER_USER]},{CONTROLLER_USER},uid-controller,"{sa_groups}"\n'
        )
        ca = self._pki.ca_cert
        self.kubeconfig.write_text(_kubeconfig(self.server, ca, ADMIN_USER, self._tokens[ADMIN_USER]))
        self.restricted_kubeconfig.write_text(
            _kubeconfig(self.server, ca, RESTRICTED_USER, self._tokens[RESTRICTED_USER])
        )
        self.controller_kubeconfig.write_text(
            _kubeconfig(self.server, ca, CONTROLLER_USER, self._tokens[CONTROLLER_USER])
        )

    def _child_setup(self) -> Callable[[], None]:
        """What a component runs between fork and exec (the node tier adds its namespace)."""
        return _die_with_parent

    def _reach(self, probe: Callable[[], bool]) -> bool:
        """Run a probe of a component's address (the node tier runs it inside its namespace)."""
        return probe()

    def _spawn(self, name: str, args: list[str], *, executable: Path | None = None) -> _Component:
        log = self.logs_dir / f"{name}.log"
        handle = log.open("ab")
        process = subprocess.Popen(
            [str(executable or self.bin_dir / args[0]), *args[1:]],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            preexec_fn=self._child_setup(),
            # Not in our process group: a terminal's Ctrl-C must reach only the process that
            # started the cluster, which stops its controller before the control plane.
            start_new_session=True,
        )
        handle.close()
        component = _Component(name, process, log)
        self.components.append(component)
        return component

    def _check_alive(self) -> None:
        for component in self.components:
            if component.process.poll() is not None:
                raise ClusterError(
                    f"{component.name} exited with code {component.process.returncode}; "
                    f"log: {component.log}\n{_tail(component.log)}"
                )

    def _wait(self, predicate: object, what: str) -> None:
        def check() -> object:
            self._check_alive()
            return predicate() if callable(predicate) else predicate

        wait_until(check, timeout=self.start_timeout, interval=0.1, what=what)

    def _start_etcd(self) -> None:
        peer = free_port()
        self._spawn(
            "etcd",
            [
                "etcd",
                "--name=default",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_endpoint}",
                f"--advertise-client-urls={self.etcd_endpoint}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync=true",  # throwaway data: durability buys nothing, fsync costs seconds
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            import urllib.request

            try:
                with urllib.request.urlopen(f"{self.etcd_endpoint}/health", timeout=2) as resp:
                    return b'"true"' in resp.read()
            except OSError:
                return False

        self._wait(lambda: self._reach(healthy), "etcd /health")

    # -- faults ----------------------------------------------------------------------------------
    def component(self, name: str) -> subprocess.Popen[bytes]:
        """The running process of a component (the latest one, after restarts)."""
        for component in reversed(self.components):
            if component.name == name:
                return component.process
        raise KeyError(name)

    def kill_apiserver(self, signum: signal.Signals = signal.SIGKILL) -> None:
        """Kill kube-apiserver (by default with SIGKILL: no graceful shutdown) and wait for it."""
        process = self.component("kube-apiserver")
        process.send_signal(signum)
        process.wait(timeout=30)

    def restart_apiserver(self, *, wait: bool = True) -> None:
        """Start kube-apiserver again on the same port with the same etcd (after `kill_apiserver`).
        Call it from the thread that started the cluster: a child is sent SIGTERM when the thread
        that spawned it ends (PR_SET_PDEATHSIG). With `wait=False`, poll `apiserver_ready()`."""
        self.components = [
            c for c in self.components if c.name != "kube-apiserver" or c.process.poll() is None
        ]
        self._start_apiserver(wait=wait)

    def apiserver_ready(self) -> bool:
        try:
            return self.admin().get_text("/readyz")[0] == 200
        except OSError:
            return False

    def _audit_args(self) -> list[str]:
        if self.audit_log is None:
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": [
                        {"level": "Metadata", "users": [CONTROLLER_USER]},
                        *self.audit_rules,
                        {"level": "None"},
                    ],
                }
            )
        )
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
        ]

    def _apiserver_args(self) -> list[str]:
        assert self._pki is not None
        pki = self._pki
        return [
            "kube-apiserver",
            f"--etcd-servers={self.etcd_endpoint}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.api_port}",
            f"--cert-dir={self.workdir / 'pki'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            # Like envtest: pods need no service-account token volume (there is no kubelet).
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=true",
            "--endpoint-reconciler-type=none",
            "--v=1",
            *self._audit_args(),
            *self.apiserver_args,
        ]

    def _start_apiserver(self, *, wait: bool = True) -> None:
        self._spawn("kube-apiserver", self._apiserver_args())
        if not wait:
            return
        admin = KubeRest.from_kubeconfig(self.kubeconfig)
        self._wait(lambda: admin.get_text("/readyz")[0] == 200, "kube-apiserver /readyz")

    def _write_kwok_debugging(self) -> Path:
        """What kwok's kubelet API answers, as kwok config documents: every pod's log is a fixed
        file, and every port-forward runs a one-exchange HTTP stand-in for an inference server
        (llmkube_testing.stdio_http) on the forwarded stream. Nothing leaves this machine."""
        log_file = self.workdir / "kwok-pod.log"
        log_file.write_text(KWOK_POD_LOG)
        documents = [
            {
                "kind": "ClusterLogs",
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "metadata": {"name": "llmkube-pod-logs"},
                "spec": {"logs": [{"logsFile": str(log_file), "follow": False}]},
            },
            {
                "kind": "ClusterPortForward",
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "metadata": {"name": "llmkube-stand-in"},
                "spec": {"forwards": [{"command": [sys.executable, "-m", "llmkube_testing.stdio_http"]}]},
            },
        ]
        path = self.workdir / "kwok-debugging.yaml"
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        return path

    def _start_full_tier(self) -> None:
        assert self._pki is not None
        self._start_controllers()
        self._spawn(
            "kwok",
            [
                "kwok",
                f"--kubeconfig={self.kubeconfig}",
                f"--config={self.bin_dir / 'kwok-stages.yaml'}",
                f"--config={self._write_kwok_debugging()}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--node-ip=127.0.0.1",
                "--node-lease-duration-seconds=40",
                "--cidr=10.244.0.0/16",
                # kwok's kubelet API: the API server's pods/log and pods/portforward reach it here.
                f"--node-port={self.kwok_port}",
                f"--server-address=127.0.0.1:{self.kwok_port}",
                # The API server does not verify kubelet certificates without a CA for them, so
                # its own serving certificate (for 127.0.0.1) does.
                f"--tls-cert-file={self._pki.serving_cert}",
                f"--tls-private-key-file={self._pki.serving_key}",
            ],
        )
        admin = self.admin()
        for node in self.nodes:
            admin.create(node.manifest())

        def nodes_ready() -> bool:
            ready = sum(condition_true(node, "Ready") for node in admin.list("v1", "Node"))
            return ready >= len(self.nodes)

        self._wait(nodes_ready, f"{len(self.nodes)} kwok nodes Ready")
        # There is no storage provisioner: a pool of pre-made volumes lets claims (such as the
        # per-namespace model cache) bind, so pods that mount them can schedule. A volume is used
        # up by its first claim (Retain: it stays Released), so the pool must outlast every claim of
        # a whole e2e session: 40 ran out once the cache-clear, prefetch and per-service modules
        # joined, and the last modules' pods waited unschedulable for a volume.
        for index in range(self.volumes):
            admin.create(local_volume(f"llmkube-local-pv-{index}", self.workdir / "volumes" / str(index)))
        self._wait_for_controller_manager()

    def _start_controllers(self) -> None:
        assert self._pki is not None
        common = [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--secure-port=0",
        ]
        self._spawn(
            "kube-controller-manager",
            [
                "kube-controller-manager",
                *common,
                f"--service-account-private-key-file={self._pki.sa_key}",
                f"--root-ca-file={self._pki.ca_cert}",
                "--controllers=*",
                "--use-service-account-credentials=false",
                "--horizontal-pod-autoscaler-sync-period=5s",
                *self.controller_manager_args,
                "--v=1",
            ],
        )
        self._spawn("kube-scheduler", ["kube-scheduler", *common, "--v=1"])

    def _wait_for_controller_manager(self) -> None:
        admin = self.admin()

        def default_service_account() -> bool:
            try:
                admin.get("v1", "ServiceAccount", "default", "default")
            except RestError:
                return False
            return True

        # The controller-manager is up once its service-account controller has done its first pass.
        self._wait(default_service_account, "kube-controller-manager (default ServiceAccount)")

    # -- diagnostics ----------------------------------------------------------------------------
    def print_logs(self, lines: int = 40) -> None:
        for component in self.components:
            print(f"===== {component.name} ({component.log}) =====")
            print(_tail(component.log, lines))

    def __repr__(self) -> str:
        return f"LocalCluster(tier={self.tier!r}, server={self.server!r}, workdir={str(self.workdir)!r})"


def _mounts_below(directory: Path) -> list[str]:
    try:
        return mounts_below(str(directory))
    except OSError:  # no /proc/self/mountinfo (not Linux): nothing of ours is mounted there
        return []


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
