"""The controller's command line: every flag of `llmkube controller` (and `llmkube run`), with its
environment variable and default. Building the parser imports nothing heavy: every start builds it."""

import argparse
import os

from llmkube.controllers.worker_counts import DEFAULT_WORKERS, MAX_MODEL_WORKERS
from llmkube.flags import (
    ProbeAddresses,
    add_kubeconfig_flag,
    add_logging_flags,
    add_probe_flags,
    add_source_egress_flags,
)

DEFAULT_METRICS_ADDRESS, DEFAULT_HEALTH_ADDRESS = ":8080", ":8081"


def add_controller_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    add_kubeconfig_flag(parser)
    parser.add_argument(
        "--namespace",
        default=env("LLMKUBE_NAMESPACE", ""),
        help="watch one namespace only (default: all) [LLMKUBE_NAMESPACE]",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=int(env("LLMKUBE_WORKERS", str(DEFAULT_WORKERS))),
        help=f"concurrent InferenceService reconciles; Models get half, at most {MAX_MODEL_WORKERS} "
        f"(default {DEFAULT_WORKERS}) [LLMKUBE_WORKERS]",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=env("LLMKUBE_LEADER_ELECT") == "true",
        help="take the Lease before writing anything (for more than one replica) [LLMKUBE_LEADER_ELECT]",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=env("POD_NAMESPACE", "llmkube-system"),
        help="the controller's own namespace: its leader-election Lease and the ConfigMap of metal "
        "Services the host agents' admission policy reads (default: $POD_NAMESPACE, else llmkube-system)",
    )
    # kube-controller-manager's names; controller-runtime's defaults.
    parser.add_argument(
        "--leader-elect-lease-duration",
        type=float,
        default=15.0,
        help="seconds a Lease is valid (default 15)",
    )
    parser.add_argument(
        "--leader-elect-renew-deadline",
        type=float,
        default=10.0,
        help="seconds the leader keeps trying to renew before it stops writing (default 10)",
    )
    parser.add_argument(
        "--leader-elect-retry-period",
        type=float,
        default=2.0,
        help="seconds between Lease attempts (default 2)",
    )
    add_probe_flags(parser, ProbeAddresses(DEFAULT_METRICS_ADDRESS, DEFAULT_HEALTH_ADDRESS))
    add_logging_flags(parser)
    parser.add_argument(
        "--model-cache-path",
        default="/models",
        help="where the controller copies local-path Models (empty: no controller-side cache)",
    )
    parser.add_argument(
        "--model-cache-size", default="100Gi", help="size of each namespace's llmkube-model-cache claim"
    )
    parser.add_argument(
        "--model-cache-storage-class", default="", help="storage class of that claim (default: the cluster's)"
    )
    parser.add_argument(
        "--model-cache-access-mode", default="ReadWriteOnce", help="access mode of that claim"
    )
    parser.add_argument(
        "--model-storage",
        choices=("namespace", "ephemeral", "per-service"),  # config.py: MODEL_STORAGE_KINDS
        default="namespace",
        help="where services' pods keep downloaded models: the namespace's claim (default), an "
        "emptyDir per pod (ephemeral: replicas on any node, one download per pod start), or a "
        "ReadWriteOnce claim of each service, deleted with it (per-service: single-replica services)",
    )
    parser.add_argument(
        "--ephemeral-cache-size-limit",
        default="20Gi",
        help="size limit of that emptyDir (default 20Gi); larger models are refused",
    )
    parser.add_argument(
        "--service-cache-size",
        default="",
        help="size of each per-service claim (default: the Model's size and a quarter, in whole GiB); "
        "the annotation inference.llmkube.dev/model-cache-size on a service asks for another",
    )
    parser.add_argument(
        "--max-service-cache-size",
        default="100Gi",
        help="the most a per-service claim may be (default 100Gi); larger models are refused",
    )
    parser.add_argument(
        "--ca-cert-configmap",
        default="",
        help="ConfigMap with CA certificates the model downloader trusts (mounted into the init container)",
    )
    parser.add_argument(
        "--init-container-image",
        default="docker.io/curlimages/curl:8.18.0",
        help="image of the model-downloader init container",
    )
    parser.add_argument(
        "--runtime-images",
        default=env("LLMKUBE_RUNTIME_IMAGES", ""),
        metavar="KEY=IMAGE[,KEY=IMAGE...]",
        help="images that replace the pinned defaults of services without spec.image (a mirror, a "
        "newer build): keys llamacpp (CPU), llamacpp-cuda, llamacpp-rocm, llamacpp-vulkan, "
        "llamacpp-intel, vllm, tgi [LLMKUBE_RUNTIME_IMAGES]",
    )
    parser.add_argument(
        "--router-image",
        default=os.environ.get("LLMKUBE_ROUTER_IMAGE", ""),
        help="image of the ModelRouter pods when a spec names none (default: this controller's release "
        "image) [LLMKUBE_ROUTER_IMAGE]",
    )
    parser.add_argument(
        "--router-allowed-images",
        default=env("LLMKUBE_ROUTER_ALLOWED_IMAGES", ""),
        metavar="IMAGE[,IMAGE...]",
        help="images a ModelRouter's spec.proxy.image may name besides --router-image: a reference with "
        "a tag or digest allows exactly that one, a repository without allows all of its tags (default "
        "none: a spec naming another image is Failed with PolicyViolation) [LLMKUBE_ROUTER_ALLOWED_IMAGES]",
    )
    parser.add_argument(
        "--router-external-hosts",
        default=env("LLMKUBE_ROUTER_EXTERNAL_HOSTS", ""),
        metavar="HOST[,HOST...]",
        help="hosts a ModelRouter backend with credentialsSecretRef may lead to besides its provider's own "
        "(https://api.openai.com, https://api.anthropic.com): host, *.domain, host:port, an IP address or "
        "a CIDR (default none: a key is sent to its provider only) [LLMKUBE_ROUTER_EXTERNAL_HOSTS]",
    )
    parser.add_argument(
        "--hf-endpoint",
        default="https://huggingface.co",
        help="the Hugging Face Hub (or a mirror of it) that hf:// Models' files are fetched from",
    )
    parser.add_argument(
        "--default-fsgroup",
        type=int,
        default=102,
        help="pod fsGroup when the service sets no securityContext",
    )
    parser.add_argument(
        "--model-revalidate-interval",
        type=float,
        default=3600.0,
        help="seconds between checks of a Ready Model's source for upstream changes (default 3600)",
    )
    parser.add_argument(
        "--model-local-roots",
        default=env("LLMKUBE_MODEL_LOCAL_ROOTS"),
        metavar="DIR[,DIR...]",
        help="the only directories local-path Models (file://..., /...) may be read from, symbolic "
        "links leading out of them refused; empty (the default of `controller`) refuses every local "
        "source. `run` defaults to your home directory",
    )
    parser.add_argument(
        "--max-pod-security",
        choices=["privileged", "baseline", "restricted"],
        default=env("LLMKUBE_MAX_POD_SECURITY", "baseline"),
        help="the most a service's pods may be, as a Pod Security Standards level (default baseline): "
        "a spec asking for more (privileged, host namespaces, added capabilities, ...) is Failed with "
        "PolicyViolation; a namespace's pod-security.kubernetes.io/enforce label can only lower it "
        "[LLMKUBE_MAX_POD_SECURITY]",
    )
    parser.add_argument(
        "--allowed-priority-classes",
        default=env("LLMKUBE_ALLOWED_PRIORITY_CLASSES", ""),
        metavar="CLASS[,CLASS...]",
        help="PriorityClasses a service may name besides the llmkube-* ones (default none; system-* "
        "never) [LLMKUBE_ALLOWED_PRIORITY_CLASSES]",
    )
    parser.add_argument(
        "--default-max-priority",
        choices=["critical", "high", "normal", "low", "batch"],
        default=env("LLMKUBE_DEFAULT_MAX_PRIORITY", "critical"),
        help="the highest priority in a namespace without the inference.llmkube.dev/max-priority "
        "label (default critical: no ceiling) [LLMKUBE_DEFAULT_MAX_PRIORITY]",
    )
    parser.add_argument(
        "--allowed-service-types",
        default=env("LLMKUBE_ALLOWED_SERVICE_TYPES", "ClusterIP"),
        metavar="TYPE[,TYPE...]",
        help="Service types spec.endpoint.type may ask for: ClusterIP, NodePort, LoadBalancer "
        "(default ClusterIP) [LLMKUBE_ALLOWED_SERVICE_TYPES]",
    )
    parser.add_argument(
        "--allowed-volume-types",
        # plan/tenancy.py's RESTRICTED_VOLUME_TYPES (a test keeps them one list), not imported: the
        # parser is built on every start.
        default=env(
            "LLMKUBE_ALLOWED_VOLUME_TYPES",
            "configMap,csi,downwardAPI,emptyDir,ephemeral,persistentVolumeClaim,projected,secret",
        ),
        metavar="TYPE[,TYPE...]",
        help="volume types spec.extraVolumes may use (default: Pod Security restricted's: "
        "configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret); "
        "serviceAccountToken allows projected ServiceAccount tokens; hostPath is judged by "
        "--model-local-roots whatever this says [LLMKUBE_ALLOWED_VOLUME_TYPES]",
    )
    parser.add_argument(
        "--allow-control-plane-placement",
        action="store_true",
        default=env("LLMKUBE_ALLOW_CONTROL_PLANE_PLACEMENT", "") == "true",
        help="let spec.affinity and spec.nodeSelector select control-plane nodes (default: refused) "
        "[LLMKUBE_ALLOW_CONTROL_PLANE_PLACEMENT=true]",
    )
    add_source_egress_flags(parser, "the controller")
    parser.add_argument(
        "--model-copy-bytes-per-second",
        type=float,
        default=0.0,
        help="disk bandwidth cap of one model copy into the cache (0: no cap)",
    )
    parser.add_argument(
        "--metal-heartbeat-timeout",
        type=float,
        default=float(env("LLMKUBE_METAL_HEARTBEAT_TIMEOUT", "180")),
        help="seconds a host agent's heartbeat stays fresh; an older one takes that host for offline "
        "(default 180, the reference's) [LLMKUBE_METAL_HEARTBEAT_TIMEOUT]",
    )
    parser.add_argument(
        "--manage-priority-classes",
        type=boolean_flag,
        nargs="?",
        const=True,
        default=boolean_flag(env("LLMKUBE_MANAGE_PRIORITY_CLASSES", "true")),
        help="create and repair the five llmkube-* PriorityClasses (default true); "
        "false when the installer (kustomize, Helm, GitOps) owns them: they are then never written",
    )


def boolean_flag(value: str) -> bool:
    """A Go-style boolean flag value: `--flag`, `--flag=true`, `--flag=false` (also 1/0, yes/no)."""
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")
