"""Operator-level settings the InferenceService planner reads: the reference operator's flags.

The process layer fills this from flags and environment; planning only ever sees the frozen value,
so a plan is a function of its arguments and nothing else.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from llmkube.api.enums import GPUVendor
from llmkube.apimachinery.proxy import DIRECT, ProxyConfig
from llmkube.plan.model.remote import DEFAULT_HF_ENDPOINT
from llmkube.plan.tenancy import TenancyPolicy

ModelStorageKind = Literal["namespace", "ephemeral", "per-service"]
MODEL_STORAGE_KINDS: tuple[ModelStorageKind, ...] = ("namespace", "ephemeral", "per-service")

DEFAULT_GPU_RESOURCES: Mapping[GPUVendor, str] = MappingProxyType(
    {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "intel": "gpu.intel.com/i915"}
)


@dataclass(frozen=True)
class OperatorConfig:
    # A non-empty cache path turns on "cached mode" for workloads: they mount the namespace's cache
    # claim and find the model under `<path>/<cacheKey>/`.
    model_cache_path: str = "/models"
    model_cache_size: str = "100Gi"
    model_cache_storage_class: str = ""
    # Only the literal "ReadWriteMany" gives RWX; anything else is RWO, as the reference's flag does.
    model_cache_access_mode: str = "ReadWriteOnce"
    # Where pods keep what they download (plan/inferenceservice/storage.py): "namespace", the
    # namespace's cache claim above; "ephemeral", an emptyDir of each pod, at most
    # `ephemeral_cache_size_limit` (a quantity; the process checks it), downloaded at every start.
    # "per-service", a ReadWriteOnce claim of each service (plan/inferenceservice/service_cache.py):
    # `service_cache_size` ("" sizes it by the Model), never more than `max_service_cache_size`.
    model_storage: ModelStorageKind = "namespace"
    ephemeral_cache_size_limit: str = "20Gi"
    service_cache_size: str = ""
    max_service_cache_size: str = "100Gi"
    ca_cert_configmap: str = ""
    init_container_image: str = "docker.io/curlimages/curl:8.18.0"
    # Where hf:// Models' files are fetched from (--hf-endpoint): the Hub, or a mirror of it.
    hf_endpoint: str = DEFAULT_HF_ENDPOINT
    # The controller's HTTPS_PROXY / HTTP_PROXY / NO_PROXY, the cluster's own addresses bypassing
    # it: what the model downloader gets (plan/model/downloader.py).
    download_proxy: ProxyConfig = DIRECT
    # <= 0 disables the default fsGroup (OpenShift assigns its own).
    default_fsgroup: int = 102
    # LLMKUBE_INTEL_GPU_RESOURCE; kept as its own setting for parity with the reference flag.
    intel_gpu_resource: str = DEFAULT_GPU_RESOURCES["intel"]
    # Per-vendor extended-resource names (the reference asked for nvidia.com/gpu even on AMD); a
    # vendor listed here wins over the defaults.
    gpu_resource_overrides: Mapping[GPUVendor, str] = field(default_factory=lambda: MappingProxyType({}))
    # Images by `--runtime-images` key (plan/inferenceservice/images.py), replacing the pinned defaults.
    runtime_images: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # What tenants may ask for: Pod Security, PriorityClasses, Service types, host paths.
    tenancy: TenancyPolicy = field(default_factory=TenancyPolicy)
    # How old a host agent's heartbeat may be before its endpoints stop counting (metal.py).
    metal_heartbeat_timeout_seconds: float = 180.0

    def gpu_resource(self, vendor: GPUVendor) -> str:
        override = self.gpu_resource_overrides.get(vendor)
        if override:
            return override
        if vendor == "intel":
            return self.intel_gpu_resource or DEFAULT_GPU_RESOURCES["intel"]
        return DEFAULT_GPU_RESOURCES[vendor]

    def known_gpu_resources(self) -> tuple[str, ...]:
        """Every resource name a scheduler message may call a GPU (`Insufficient <name>`), AMD's
        included, deduplicated."""
        names = [
            *DEFAULT_GPU_RESOURCES.values(),
            "gpu.intel.com/xe",
            self.intel_gpu_resource,
            *self.gpu_resource_overrides.values(),
        ]
        return tuple(dict.fromkeys(n for n in names if n))
