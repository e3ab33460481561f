"""The hardening defaults of inference pods, what each runtime needs to keep
working under them, and how the user overrides them. docs/behaviour.md#pod-hardening tells users.

- No ServiceAccount token in the pod (`automountServiceAccountToken: false`): no runtime talks to
  the Kubernetes API. (The spec has no field for it: the contract is the reference operator's.)
- The main container's root filesystem is read-only for the runtimes whose images we ship as
  defaults (llama.cpp, vLLM, TGI): each directory the image writes gets an emptyDir, and HOME points
  into /tmp, where every cache under $HOME then lands (HuggingFace, vLLM, torch, Triton; llama.cpp's
  `-hf` downloads). A user `securityContext` replaces the default one whole, so
  `readOnlyRootFilesystem: false` there turns it off; a user `HOME` variable wins over ours. Images we
  do not know (generic, PersonaPlex) keep a writable root.
- The memory limit equals the memory request when there is one (`resources.hostMemory`, else
  `resources.memory`): a server that outgrows what it asked for is OOM-killed in its own cgroup
  instead of pushing the node into evicting its neighbours, and the pod's memory is as predictable as
  its request. Weights are memory-mapped page cache (reclaimable), and the KV cache and buffers are
  allocated at start, so a request that fits the loaded model fits the limit, with one exception:
  llama-server's prompt cache grows with use up to `--cache-ram` (docs/memory-fit.md), so a tight
  request wants `--cache-ram` in extraArgs, or a higher limit through the annotation. No request, no limit
  (nothing to derive one from); CPU is never limited (throttling only slows inference down). The
  annotation `inference.llmkube.dev/memory-limit` overrides it: `none` (no limit), or a quantity at
  least the request (the spec has no limits field: the contract is the reference operator's).
- The model-downloader init container asks for little and is capped (curl streams to disk), with a
  read-only root too: it writes only under /models.
- Pod Security "restricted" by default: for the runtimes whose images we know, the pod runs as a
  non-root user and group (`NON_ROOT_USER`, the convention of distroless images; the images run
  as root only because nobody told them otherwise: llama-server, vLLM and TGI need no privilege),
  with RuntimeDefault seccomp, no privilege escalation and every capability dropped. The
  downloader runs as the pod's user (its files are then the server's own) and says
  `runAsNonRoot` itself unless the pod asks for root.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceResources
from llmkube.apimachinery.quantity import QuantityError, canonical_quantity, parse_quantity

HOME = "/tmp"
#: The user and group inference pods run as by default (plan/inferenceservice/deployment.py).
NON_ROOT_USER = 65532
INIT_CONTAINER_RESOURCES: KubeObject = {
    "requests": {"cpu": "100m", "memory": "64Mi"},
    "limits": {"memory": "512Mi"},
}


MEMORY_LIMIT_ANNOTATION = "inference.llmkube.dev/memory-limit"
NO_LIMIT = "none"
_ANNOTATION_PATH = f"metadata.annotations[{MEMORY_LIMIT_ANNOTATION}]"


@dataclass(frozen=True)
class MemoryLimit:
    """What the memory limit is, from the request and the annotation."""

    quantity: str | None  # canonical, or None: no limit
    problem: tuple[str, str] | None = None  # (field path, message): the annotation cannot be used


def memory_request(resources: InferenceResources | None) -> str | None:
    """The memory the server asks for: `hostMemory`, else `memory` (as written)."""
    if resources is None:
        return None
    return resources.host_memory or resources.memory or None


def memory_limit(resources: InferenceResources | None, annotations: Mapping[str, str] | None) -> MemoryLimit:
    """The request by default; the annotation's `none` or quantity when it is set. Assumes the
    request itself is a valid quantity (plan/inferenceservice/resources.py reports it otherwise)."""
    request = memory_request(resources)
    default = canonical_quantity(request) if request else None
    text = (annotations or {}).get(MEMORY_LIMIT_ANNOTATION)
    if text is None:
        return MemoryLimit(default)
    text = text.strip()
    if text.lower() == NO_LIMIT:
        return MemoryLimit(None)
    try:
        limit = parse_quantity(text).value
    except QuantityError:
        problem = f'"{text}" is neither "{NO_LIMIT}" nor a quantity (for example 16Gi)'
        return MemoryLimit(default, (_ANNOTATION_PATH, problem))
    if limit <= 0:
        return MemoryLimit(default, (_ANNOTATION_PATH, f'"{text}" must be more than 0'))
    if request and limit < parse_quantity(request).value:
        problem = (
            f'"{text}" is less than the memory request "{request}": the limit must be at least the request'
        )
        return MemoryLimit(default, (_ANNOTATION_PATH, problem))
    return MemoryLimit(canonical_quantity(text))


def volume_name(path: str) -> str:
    """`/tmp` -> `tmp`, `/data` -> `data`: the emptyDir behind a writable directory."""
    return path.strip("/").replace("/", "-") or "root"


def writable_volumes(dirs: tuple[str, ...]) -> list[KubeObject]:
    return [{"name": volume_name(path), "emptyDir": {}} for path in dirs]


def writable_mounts(dirs: tuple[str, ...]) -> list[KubeObject]:
    return [{"name": volume_name(path), "mountPath": path} for path in dirs]


def home_env(dirs: tuple[str, ...]) -> list[KubeObject]:
    """HOME in the writable /tmp, for a read-only root (generated first: a user HOME replaces it)."""
    return [{"name": "HOME", "value": HOME}] if HOME in dirs else []
