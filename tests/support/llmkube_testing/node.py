"""The `node` tier: the local control plane plus one real Kubernetes node, so pods really run.

    etcd, kube-apiserver, kube-controller-manager, kube-scheduler     (as in the `full` tier)
    containerd + runc, with its own root, state and socket            (Debian's packages)
    kubelet + kube-proxy (iptables mode)                              (built by hack/build-k8s.sh node)
    a CNI bridge (`llmkube0`, pods in 10.88.0.0/16)                   (containernetworking-plugins)

all inside a network namespace of its own (`llmkube_testing.netns`): the node's address is
10.88.0.1 on the pods' bridge, Services are 10.0.0.0/24, and no iptables rule, route or sysctl of the
host's network is touched. The API server is reached from outside on the same loopback port as
inside (a port forward), so the admin kubeconfig works for this process, kubectl and the user's shell.

Images come from OCI archives built by hack/build-images.sh and are imported on start; nothing is
pulled (pods must use `imagePullPolicy: Never` or `IfNotPresent`). Claims bind to a pool of hostPath
volumes. Linux and root only: `node_tier_unavailable()` says why not elsewhere.

Everything it creates is listed in a `Footprint` before it is created, and `stop()` (or, if this
process is killed, the janitor process it starts) removes exactly that: see `node_cleanup`.
"""

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import yaml

from llmkube_testing import images, node_cleanup, node_config
from llmkube_testing.cluster import (
    ClusterError,
    LocalCluster,
    MissingBinaryError,
    _die_with_parent,
    local_volume,
)
from llmkube_testing.netns import NetworkLayout, PortForward, PrivateNetwork, Target
from llmkube_testing.pki import issue_certificate
from llmkube_testing.rest import condition_true

NODE_NAME = "llmkube-node"
FRONT_PROXY_CLIENT = "front-proxy-client"
HPA_DOWNSCALE_WINDOW = "20s"
NODE_BINARIES = ("kubelet", "kube-proxy", "kubectl")
# Host programs the node needs (hack/node-host.sh installs them).
HOST_PROGRAMS = (
    "/usr/bin/containerd",
    "/usr/bin/ctr",
    "/usr/bin/containerd-shim-runc-v2",
    "/usr/sbin/runc",
    "/usr/lib/cni/bridge",
    "/usr/lib/cni/host-local",
    "/usr/lib/cni/loopback",
    "/usr/sbin/iptables",
)
PREREQS_COMMAND = "make node-prereqs"
OFF_SWITCH = "LLMKUBE_NODE_TIER"  # =off skips the tier on a machine that could run it


class NodeTierUnavailable(ClusterError):
    """This machine cannot run a real node at all (not Linux, not root, switched off)."""


def node_tier_unavailable() -> str | None:
    """Why the node tier cannot run here, or None when it can (prerequisites aside)."""
    if os.environ.get(OFF_SWITCH, "").lower() in ("0", "off", "no", "false", "skip"):
        return f"the node tier is switched off ({OFF_SWITCH}={os.environ[OFF_SWITCH]})"
    if not sys.platform.startswith("linux"):
        return f"the node tier needs Linux (kubelet, containerd, network namespaces); this is {sys.platform}"
    if os.geteuid() != 0:
        return "the node tier needs root (kubelet, containerd and network namespaces); run the tests as root"
    return None


def missing_prerequisites(bin_dir: Path, images_dir: Path) -> list[str]:
    missing = [program for program in HOST_PROGRAMS if not os.access(program, os.X_OK)]
    missing += [str(bin_dir / name) for name in NODE_BINARIES if not os.access(bin_dir / name, os.X_OK)]
    missing += [str(images_dir / name) for name in images.missing_images(images_dir)]
    return missing


class NodeCluster(LocalCluster):
    def __init__(
        self,
        *,
        layout: NetworkLayout | None = None,
        images_dir: Path | None = None,
        node_name: str = NODE_NAME,
        volumes: int = 20,
        **kwargs: object,
    ) -> None:
        super().__init__("node", **kwargs)  # type: ignore[arg-type]
        # An HPA waits 5 minutes of lower recommendations before it scales down (the cluster-wide
        # default, which a service's HPA keeps: spec.autoscaling has no behaviour field); the
        # autoscaling test needs the way back to minReplicas within a test's time.
        window = f"--horizontal-pod-autoscaler-downscale-stabilization={HPA_DOWNSCALE_WINDOW}"
        self.controller_manager_args = (window,)
        # With `audit`: the requests of pods' ServiceAccounts too (a ModelRouter's router watches with
        # its own token), but not kube-controller-manager's controllers (kube-system's accounts).
        self.audit_rules = (
            {"level": "None", "userGroups": ["system:serviceaccounts:kube-system"]},
            {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        )
        self.layout = layout or NetworkLayout()
        self.network = PrivateNetwork(self.layout)
        self.images_dir = images_dir or images.default_images_dir()
        self.node_name = node_name
        self.node_volumes = volumes
        self.runtime_tmpfs = os.environ.get("LLMKUBE_NODE_TMPFS_SIZE", "6g")
        self.run_id = uuid.uuid4().hex[:8]
        self.node_dir = self.workdir / "node"
        self.paths = node_config.NodePaths(self.node_dir)
        self.cgroup = f"llmkube-node-{self.run_id}"
        self.containerd_socket = self.paths.containerd_socket
        self._api_forward: PortForward | None = None
        self._janitor: subprocess.Popen[bytes] | None = None
        self._footprint: node_cleanup.Footprint | None = None
        self._runtime_procs: list[bytes] = []

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> "NodeCluster":
        return self.start()

    def start(self) -> "NodeCluster":
        if reason := node_tier_unavailable():
            raise NodeTierUnavailable(reason)
        if missing := missing_prerequisites(self.bin_dir, self.images_dir):
            raise MissingBinaryError(
                f"the node tier is missing {', '.join(missing)}. Build them with: {PREREQS_COMMAND}"
            )
        images.refresh_controller_image(self.images_dir)
        node_cleanup.sweep_stale()
        t0 = time.monotonic()
        self._record_footprint()
        self.network.create()
        # The API server listens inside; the same loopback port outside leads to it.
        self._api_forward = self.network.forward(("127.0.0.1", self.api_port), listen_port=self.api_port)
        super().start()  # etcd + API server (inside), or stop() and raise
        try:
            self._start_controllers()
            self._start_node()
            self._wait_for_controller_manager()
        except BaseException as error:
            self.print_logs()
            self.failed(f"the node tier did not start: {error!r}")
            self.stop()
            raise
        self.startup_seconds["node"] = time.monotonic() - t0
        return self

    def stop(self) -> None:
        if self._stopped:
            return
        t0 = time.monotonic()
        self._stop_components()  # every component, last started first: kube-proxy, kubelet, containerd, ...
        if self._footprint is not None:
            report = node_cleanup.clean_up(self._footprint, keep=(self.paths.pod_logs.name,))
            self.startup_seconds["teardown"] = time.monotonic() - t0
            if os.environ.get("LLMKUBE_NODE_VERBOSE"):
                print(f"node tier {self.run_id}: cleaned up {report}", file=sys.stderr)
        if self._api_forward is not None:
            self._api_forward.close()
        self.network.close()
        if self._janitor is not None and self._janitor.stdin is not None:
            with contextlib.suppress(OSError):
                self._janitor.stdin.write(b"done")
                self._janitor.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._janitor.wait(timeout=5)
        self._dispose_workdir()  # last: the node's mounts below it are gone by now

    def _record_footprint(self) -> None:
        self._footprint = node_cleanup.Footprint(
            run_id=self.run_id,
            owner_pid=os.getpid(),
            owner_start=node_cleanup.process_start_time(os.getpid()),
            node_dir=str(self.node_dir),
            containerd_root=str(self.paths.containerd_root),
            containerd_state=str(self.paths.containerd_state),
            containerd_address=str(self.containerd_socket),
            cgroup=self.cgroup,
            cni_network=f"llmkube-{self.run_id}",
            sysctls=node_cleanup.original_sysctls(),
        )
        self._footprint.register()
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        janitor_log = (self.logs_dir / "janitor.log").open("ab")
        self._janitor = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llmkube_testing.node_cleanup",
                "watch",
                str(self._footprint.registry_file),
            ],
            stdin=subprocess.PIPE,
            stdout=janitor_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this process, and a Ctrl-C of the terminal
        )
        janitor_log.close()
        # Everything the tier starts joins this cgroup (containerd's shims and the pods end up
        # below it too), so one sweep of the tree ends every process, however the run ended.
        node_cleanup.create_cgroup(f"{self.cgroup}/runtime")
        self._runtime_procs = [p.encode() for p in node_cleanup.cgroup_procs_files(f"{self.cgroup}/runtime")]

    # -- hooks of LocalCluster -------------------------------------------------------------------
    def _child_setup(self) -> Callable[[], None]:
        if self.network._fd is None:
            return _die_with_parent
        enter = self.network.child_setup()
        procs = self._runtime_procs

        def setup() -> None:
            enter()
            for path in procs:
                with contextlib.suppress(OSError):
                    fd = os.open(path, os.O_WRONLY)
                    os.write(fd, b"0")
                    os.close(fd)

        return setup

    def _reach(self, probe: Callable[[], bool]) -> bool:
        return self.network.run_inside(probe)

    def _apiserver_args(self) -> list[str]:
        pki = self._pki
        assert pki is not None
        issue_certificate(
            pki,
            "apiserver-kubelet-client",
            common_name="kube-apiserver-kubelet-client",
            organizations=("system:masters",),
        )
        proxy_cert, proxy_key = issue_certificate(pki, FRONT_PROXY_CLIENT, common_name=FRONT_PROXY_CLIENT)
        replaced = {
            # Inside the private namespace only: the pods reach the API server on the node address.
            "--bind-address": "0.0.0.0",
            "--advertise-address": self.layout.node_ip,
        }
        dropped = {"--disable-admission-plugins", "--endpoint-reconciler-type"}  # ServiceAccount admission on
        args = []
        for arg in super()._apiserver_args():
            flag = arg.split("=", 1)[0]
            if flag in dropped:
                continue
            args.append(f"{flag}={replaced[flag]}" if flag in replaced else arg)
        directory = pki.ca_cert.parent
        return [
            *args,
            "--enable-admission-plugins=NodeRestriction",
            f"--kubelet-client-certificate={directory / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={directory / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={pki.ca_cert}",
            "--kubelet-preferred-address-types=InternalIP",
            # The aggregation layer, as kubeadm sets it up: an APIService served by a process of
            # the test (prometheus-adapter for custom.metrics.k8s.io) gets the caller's identity in
            # request headers it trusts from this client certificate, and is dialled at its
            # endpoint address (the API server runs inside the node's network, beside it).
            f"--requestheader-client-ca-file={pki.ca_cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={proxy_cert}",
            f"--proxy-client-key-file={proxy_key}",
            "--enable-aggregator-routing=true",
        ]

    # -- the node ----------------------------------------------------------------------------------
    def _start_node(self) -> None:
        t0 = time.monotonic()
        paths = self.paths
        for directory in (paths.containerd, paths.cni, paths.kubelet, paths.pod_logs, paths.volumes):
            directory.mkdir(parents=True, exist_ok=True)
        self._issue_node_certificates()
        self._mount_runtime_tmpfs()
        self._start_containerd()
        self.startup_seconds["containerd"] = time.monotonic() - t0
        t1 = time.monotonic()
        self._import_images()
        self.startup_seconds["images"] = time.monotonic() - t1
        node_cleanup.create_cgroup(f"{self.cgroup}/pods")
        self._start_kubelet()
        self._start_kube_proxy()
        admin = self.admin()

        def node_ready() -> bool:
            node = admin.get_or_none("v1", "Node", self.node_name)
            return node is not None and condition_true(node, "Ready")

        self._wait(node_ready, f"node {self.node_name} Ready")
        self._create_volumes()

    def _mount_runtime_tmpfs(self) -> None:
        """containerd's root and state in memory: unpacking the imported images is faster, and
        removing them (tens of thousands of small files) is one unmount instead of a minute of
        disk work. Memory is only used for what is written; without tmpfs, the disk is used."""
        directory = self.paths.containerd
        result = subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                f"size={self.runtime_tmpfs},mode=0700",
                "llmkube-node",
                str(directory),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            print(f"node tier: containerd stays on disk (tmpfs: {result.stderr.strip()})", file=sys.stderr)

    def _issue_node_certificates(self) -> None:
        pki = self._pki
        assert pki is not None
        issue_certificate(
            pki,
            "kubelet-client",
            common_name=f"system:node:{self.node_name}",
            organizations=("system:nodes",),
        )
        issue_certificate(
            pki,
            "kubelet-serving",
            common_name=f"system:node:{self.node_name}",
            organizations=("system:nodes",),
            server_names=(self.node_name, "localhost"),
            server_ips=(self.layout.node_ip, "127.0.0.1"),
        )
        issue_certificate(pki, "kube-proxy", common_name="system:kube-proxy")

    def _certificate_kubeconfig(self, user: str) -> Path:
        assert self._pki is not None
        path = self.paths.config(f"{user}.kubeconfig")
        path.write_text(
            yaml.safe_dump(node_config.certificate_kubeconfig(self.server, self._pki.ca_cert.parent, user))
        )
        return path

    def _start_containerd(self) -> None:
        footprint = self._footprint
        assert footprint is not None
        config = self.paths.containerd / "config.toml"
        config.write_text(node_config.containerd_config(self.paths, sandbox_image=images.PAUSE.ref))
        network = node_config.cni_network(self.paths, self.layout, footprint.cni_network)
        (self.paths.cni / "10-llmkube.conflist").write_text(json.dumps(network, indent=1))  # JSON: libcni
        self._spawn(
            "containerd", ["containerd", f"--config={config}"], executable=Path("/usr/bin/containerd")
        )
        self._wait(lambda: self._ctr("version").returncode == 0, "containerd")

    def _ctr(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                "ctr",
                "--address",
                str(self.containerd_socket),
                "--namespace",
                node_cleanup.CONTAINERD_NAMESPACE,
                *args,
            ],
            capture_output=True,
            text=True,
            check=check,
            timeout=300,
        )

    def _import_images(self) -> None:
        for image in images.NODE_IMAGES:
            archive = self.images_dir / image.archive
            result = self._ctr("images", "import", "--base-name", image.repository, str(archive))
            if (
                result.returncode != 0
                or image.ref not in self._ctr("images", "list", "--quiet").stdout.split()
            ):
                raise ClusterError(f"importing {archive} ({image.ref}) failed: {result.stderr.strip()}")
        for alias, image in images.IMAGE_ALIASES.items():
            self._ctr("images", "tag", "--force", image.ref, alias, check=True)

    def _start_kubelet(self) -> None:
        assert self._pki is not None
        self.paths.config("resolv.conf").write_text("# the node tier has no DNS server\n")
        config = node_config.kubelet_config(
            self.paths, self.layout, pki_dir=self._pki.ca_cert.parent, cgroup_root=f"/{self.cgroup}/pods"
        )
        self.paths.config("kubelet.yaml").write_text(yaml.safe_dump(config))
        self._spawn(
            "kubelet",
            [
                "kubelet",
                f"--config={self.paths.config('kubelet.yaml')}",
                f"--kubeconfig={self._certificate_kubeconfig('kubelet-client')}",
                f"--root-dir={self.paths.kubelet}",
                f"--hostname-override={self.node_name}",
                f"--node-ip={self.layout.node_ip}",
                "--v=1",
            ],
        )

    def _start_kube_proxy(self) -> None:
        kubeconfig = self._certificate_kubeconfig("kube-proxy")
        config = node_config.kube_proxy_config(self.layout, kubeconfig=kubeconfig, node_name=self.node_name)
        self.paths.config("kube-proxy.yaml").write_text(yaml.safe_dump(config))
        self._spawn("kube-proxy", ["kube-proxy", f"--config={self.paths.config('kube-proxy.yaml')}", "--v=1"])

    def _create_volumes(self) -> None:
        """hostPath volumes for claims without a storage class. Mode 0777 like a local-path
        provisioner's directories: the model downloader runs as an unprivileged user."""
        admin = self.admin()
        for index in range(self.node_volumes):
            path = self.paths.volumes / str(index)
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o777)
            admin.create(local_volume(f"llmkube-node-pv-{index}", path))

    # -- for tests and `llmkube run` -------------------------------------------------------------
    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    def kubectl_run(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        """`kubectl` with the admin kubeconfig; raises with its output when it fails."""
        result = subprocess.run(
            [str(self.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: exit {result.returncode}: {result.stderr.strip()}")
        return result.stdout

    def forward(self, target: Target, listen_port: int = 0) -> PortForward:
        """A loopback port of this machine that leads to `target` inside the node's network."""
        return self.network.forward(target, listen_port)

    def print_logs(self, lines: int = 40) -> None:
        super().print_logs(lines)
        for log in sorted(self.paths.pod_logs.glob("*/*/*.log")) if self.node_dir.is_dir() else []:
            print(f"===== pod log {log} =====")
            print("\n".join(log.read_text(errors="replace").splitlines()[-lines:]))
