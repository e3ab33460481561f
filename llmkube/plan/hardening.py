"""The hardening defaults of inference pods (issue 11, item 9), what each runtime needs to keep
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
  allocated at start, so a request that fits the loaded model fits the limit. No request, no limit
  (nothing to derive one from); CPU is never limited (throttling only slows inference down).
- The model-downloader init container asks for little and is capped (curl streams to disk), with a
  read-only root too: it writes only under /models.
"""

from llmkube.api.base import KubeObject

HOME = "/tmp"
INIT_CONTAINER_RESOURCES: KubeObject = {
    "requests": {"cpu": "100m", "memory": "64Mi"},
    "limits": {"memory": "512Mi"},
}


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
