"""The node tier's configuration files, as data: containerd, the CNI network, kubelet, kube-proxy
and their kubeconfigs. Pure functions of where things live (`NodePaths`) and the network layout;
`node.NodeCluster` writes them and starts the processes. The settings that matter, and why, are
commented where they are set.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmkube_testing.netns import NetworkLayout

Obj = dict[str, Any]


@dataclass(frozen=True)
class NodePaths:
    """Every file and directory of one node, below its own directory."""

    root: Path

    @property
    def containerd(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_root(self) -> Path:
        return self.containerd / "root"

    @property
    def containerd_state(self) -> Path:
        return self.containerd / "state"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def cni(self) -> Path:
        return self.root / "cni"

    @property
    def kubelet(self) -> Path:
        return self.root / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def volumes(self) -> Path:
        return self.root / "volumes"

    def config(self, name: str) -> Path:
        return self.root / name


def containerd_config(paths: NodePaths, *, sandbox_image: str) -> str:
    """containerd 1.6 (Debian's) with its own root, state and sockets, so it never meets a system
    containerd, and the CRI settings this kind of machine needs."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{paths.containerd_root}"
state = "{paths.containerd_state}"
[grpc]
  address = "{paths.containerd_socket}"
[ttrpc]
  address = "{paths.containerd_socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{paths.containerd / "opt"}"
[{cri}]
  sandbox_image = "{sandbox_image}"
  # Without CAP_SYS_RESOURCE (these VMs) runc cannot set an oom_score_adj below its own, and pod
  # sandboxes ask for -998: cap it at ours instead of failing every sandbox.
  restrict_oom_score_adj = true
  # Pod network namespaces under our state directory, not /run/netns: cleaned with our mounts.
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{paths.containerd / "runc"}"
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{paths.cni}"
"""


def cni_network(paths: NodePaths, layout: NetworkLayout, name: str) -> Obj:
    """A bridge with the node as the pods' gateway; addresses from host-local, kept in our directory.
    The network's name also names its entries in the global CNI cache (cleaned by it)."""
    return {
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": layout.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(paths.cni / "ipam"),
                    "ranges": [[{"subnet": layout.pod_cidr, "gateway": layout.node_ip}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            }
        ],
    }


def kubelet_config(paths: NodePaths, layout: NetworkLayout, *, pki_dir: Path, cgroup_root: str) -> Obj:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # These VMs run cgroup v1; kubelet >= 1.35 refuses it unless told otherwise.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,  # our own tree: two tiers never share pod cgroups
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "address": layout.node_ip,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki_dir / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(pki_dir / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(pki_dir / "kubelet-serving.key"),
        "clusterDomain": "cluster.local",
        "resolvConf": str(paths.config("resolv.conf")),  # there is no DNS server
        "podLogsDir": str(paths.pod_logs),
        "failSwapOn": False,
        # A shared developer disk must not make the node evict pods, nor delete images that cannot
        # be pulled again.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
    }


def kube_proxy_config(layout: NetworkLayout, *, kubeconfig: Path, node_name: str) -> Obj:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": layout.pod_cidr,
        "hostnameOverride": node_name,
        # Leave the kernel's conntrack limits and timeouts alone.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        # Source-NAT all Service traffic to the node: replies between two pods on the bridge then
        # return through the node's conntrack (no br_netfilter module on the host needed).
        "iptables": {"masqueradeAll": True},
        "metricsBindAddress": "127.0.0.1:10249",
        "healthzBindAddress": "127.0.0.1:10256",
    }


def certificate_kubeconfig(server: str, pki_dir: Path, user: str) -> Obj:
    """A kubeconfig for `<user>.crt` / `<user>.key` of the cluster CA (kubelet, kube-proxy)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(pki_dir / "ca.crt")}}
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(pki_dir / f"{user}.crt"),
                    "client-key": str(pki_dir / f"{user}.key"),
                },
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }
