"""InferenceService (`isvc`): field for field the contract, llmkube/api/contract/.

Enums, ranges and defaults are the contract's; the API server applies the same defaults, so a
document read back from the cluster and one parsed here agree. Kubernetes sub-objects (env,
tolerations, probes, security contexts) stay plain dicts: the API server validates them.
"""

from datetime import datetime
from typing import Literal

from pydantic import Field

from llmkube.api.base import ApiModel, KubeObject
from llmkube.api.constants import API_VERSION, ISVC_KIND
from llmkube.api.enums import (
    AttentionBackend,
    CacheType,
    GPUSharingMode,
    MetricType,
    ModelCachePersistence,
    Phase,
    Priority,
    RopeScalingType,
    Runtime,
    ServiceType,
    ServingMode,
    SGLangAttentionBackend,
    SGLangKVCacheDtype,
    SGLangLogLevel,
    SGLangReasoningParser,
    SGLangSpeculativeAlgorithm,
    SGLangToolCallParser,
    SLOIndicator,
    SpeculativeDecodingType,
    TGIDtype,
    TGIQuantize,
    VLLMDtype,
    VLLMKVCacheDtype,
    VLLMQuantization,
)
from llmkube.api.meta import Condition, ObjectMeta

INT32_MAX = 2**31 - 1


class SecretKeySelector(ApiModel):
    """corev1.SecretKeySelector (atomic): a key in a Secret of the service's namespace."""

    key: str
    name: str | None = ""
    optional: bool | None = None


class MetricSpec(ApiModel):
    name: str
    type: MetricType
    target_average_value: str | None = None
    target_average_utilization: int | None = Field(default=None, le=INT32_MAX)


class AutoscalingSpec(ApiModel):
    max_replicas: int = Field(ge=1, le=100)
    min_replicas: int | None = Field(default=1, ge=1, le=10)
    metrics: list[MetricSpec] | None = None


class GatewayReference(ApiModel):
    name: str
    namespace: str | None = None


class GatewaySpec(ApiModel):
    """The reference's Envoy AI Gateway exposure (v0.9): accepted, no effect here."""

    enabled: bool | None = None
    gateway_ref: GatewayReference
    model_name: str | None = None


class EndpointSpec(ApiModel):
    port: int | None = Field(default=8080, ge=1, le=65535)
    path: str | None = "/v1/chat/completions"
    type: ServiceType | None = "ClusterIP"
    #: v0.9: the node port to pin (NodePort and LoadBalancer Services)
    node_port: int | None = Field(default=None, ge=30000, le=32767)
    gateway: GatewaySpec | None = None


class GPUSharingSpec(ApiModel):
    """The reference's GPU sharing tiers (v0.9): accepted, no effect here."""

    mode: GPUSharingMode | None = "exclusive"
    profile: str | None = None
    memory_limit_gi_b: int | None = Field(default=None, ge=1, le=INT32_MAX, alias="memoryLimitGiB")


class InferenceResources(ApiModel):
    """Quantities stay strings here; planning validates them and reports bad ones in status."""

    gpu: int | None = Field(default=None, ge=0, le=8)
    cpu: str | None = None
    memory: str | None = None
    host_memory: str | None = None
    gpu_memory: str | None = None
    #: v0.9: node disk, requests and limits of ephemeral-storage
    ephemeral_storage: str | None = Field(
        default=None, pattern=r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
    )
    gpu_sharing: GPUSharingSpec | None = None


class RopeScalingSpec(ApiModel):
    type: RopeScalingType
    factor: str | None = Field(default=None, pattern=r"^[0-9]+(\.[0-9]+)?$")
    original_context: int | None = Field(default=None, ge=128, le=INT32_MAX)


class ProbeOverrides(ApiModel):
    startup: KubeObject | None = None
    liveness: KubeObject | None = None
    readiness: KubeObject | None = None


class PersonaPlexConfig(ApiModel):
    quantize_4bit: bool | None = Field(default=None, alias="quantize4Bit")
    cpu_offload: bool | None = None
    hf_token_secret_ref: SecretKeySelector | None = None


class SpeculativeConfig(ApiModel):
    enabled: bool | None = None
    model: str | None = None
    num_speculative_tokens: int | None = Field(default=4, ge=1, le=16)


class VLLMConfig(ApiModel):
    tensor_parallel_size: int | None = Field(default=None, le=INT32_MAX)
    max_model_len: int | None = Field(default=None, le=INT32_MAX)
    quantization: VLLMQuantization | None = None
    dtype: VLLMDtype | None = None
    kv_cache_dtype: VLLMKVCacheDtype | None = "auto"
    kv_cache_custom_dtype: str | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    max_num_batched_tokens: int | None = Field(default=None, ge=512, le=INT32_MAX)
    attention_backend: AttentionBackend | None = None
    speculative: SpeculativeConfig | None = None
    enable_expert_parallel: bool | None = None
    hf_token_secret_ref: SecretKeySelector | None = None
    cpu_offload_gb: int | None = Field(default=None, ge=0, le=INT32_MAX, alias="cpuOffloadGB")
    gpu_memory_utilization: float | None = Field(default=None, ge=0.1, le=0.99)


class TGIConfig(ApiModel):
    quantize: TGIQuantize | None = None
    max_input_length: int | None = Field(default=None, le=INT32_MAX)
    max_total_tokens: int | None = Field(default=None, le=INT32_MAX)
    dtype: TGIDtype | None = None
    hf_token_secret_ref: SecretKeySelector | None = None


class SpeculativeDecodingSpec(ApiModel):
    """v0.9: llama.cpp's speculative decoding (--spec-type and its draft weights)."""

    type: SpeculativeDecodingType
    draft_model_ref: str | None = None
    draft_model: str | None = Field(default=None, min_length=1, max_length=253)
    n_draft_max: int | None = Field(default=None, ge=1, le=INT32_MAX)
    p_min: float | None = Field(default=None, ge=0, le=1)


class ModelCacheSpec(ApiModel):
    """v0.9: where this service caches its weights (an existing claim, or none at all)."""

    persistence: ModelCachePersistence | None = None
    claim_name: str | None = Field(default=None, min_length=1, max_length=253)


class SGLangSpeculativeConfig(ApiModel):
    enabled: bool | None = None
    algorithm: SGLangSpeculativeAlgorithm | None = None
    draft_model_path: str | None = None
    num_steps: int | None = Field(default=None, ge=1, le=INT32_MAX)
    eagle_top_k: int | None = Field(default=None, ge=1, le=INT32_MAX, alias="eagleTopK")
    num_draft_tokens: int | None = Field(default=4, ge=1, le=INT32_MAX)
    accept_threshold_single: float | None = Field(default=None, ge=0, le=1)
    accept_threshold_acc: float | None = Field(default=None, ge=0, le=1)


class SGLangLoRAAdapter(ApiModel):
    name: str = Field(min_length=1)
    path: str = Field(min_length=1)


class SGLangConfig(ApiModel):
    tensor_parallel_size: int | None = Field(default=None, ge=1, le=INT32_MAX)
    expert_parallel_size: int | None = Field(default=None, ge=1, le=INT32_MAX)
    data_parallel_size: int | None = Field(default=None, ge=1, le=INT32_MAX)
    context_length: int | None = Field(default=None, ge=128, le=INT32_MAX)
    mem_fraction_static: float | None = Field(default=None, ge=0.1, le=0.99)
    chunked_prefill_size: int | None = Field(default=None, ge=512, le=INT32_MAX)
    max_running_requests: int | None = Field(default=None, ge=1, le=INT32_MAX)
    quantization: str | None = None
    kv_cache_dtype: SGLangKVCacheDtype | None = "auto"
    kv_cache_custom_dtype: str | None = None
    attention_backend: SGLangAttentionBackend | None = None
    enable_prefix_caching: bool | None = None
    tool_call_parser: SGLangToolCallParser | None = None
    reasoning_parser: SGLangReasoningParser | None = None
    chat_template: str | None = None
    speculative: SGLangSpeculativeConfig | None = None
    lora_modules: list[str] | None = None
    max_lora_rank: int | None = Field(default=None, ge=1, le=INT32_MAX)
    lora_target_modules: list[str] | None = None
    lora_adapters: list[SGLangLoRAAdapter] | None = None
    log_level: SGLangLogLevel | None = None
    trust_remote_code: bool | None = None
    skip_tokenizer_init: bool | None = None
    hf_token_secret_ref: SecretKeySelector | None = None


class DisruptionSpec(ApiModel):
    """The reference's Karpenter annotation management (v0.9): accepted, no effect here."""

    protect_startup: bool | None = True
    protect_always: bool | None = None


class RolloutPolicySpec(ApiModel):
    """v0.9: wait for idle replicas before replacing them (llmkube's drain)."""

    wait_for_idle: bool | None = None
    idle_timeout_seconds: int | None = Field(default=300, ge=0)
    force: bool | None = None


class SLOSpec(ApiModel):
    """The reference's Pyrra ServiceLevelObjective (v0.9): accepted, no effect here."""

    name: str | None = None
    objective: str = Field(pattern=r"^[0-9]+(\.[0-9]+)?$")
    window: str | None = Field(default="28d", pattern=r"^[0-9]+[mhdw]$")
    indicator: SLOIndicator | None = "availability"
    latency_threshold: str | None = Field(default=None, pattern=r"^[0-9]+(\.[0-9]+)?$")


class InferenceServiceSpec(ApiModel):
    model_ref: str
    runtime: Runtime | None = "llamacpp"
    replicas: int | None = Field(default=1, ge=0, le=10)
    autoscaling: AutoscalingSpec | None = None
    image: str | None = None
    endpoint: EndpointSpec | None = None
    resources: InferenceResources | None = None
    tolerations: list[KubeObject] | None = None
    node_selector: dict[str, str] | None = None
    pod_annotations: dict[str, str] | None = None
    pod_labels: dict[str, str] | None = None
    runtime_class_name: str | None = None
    context_size: int | None = Field(default=None, ge=128, le=2097152)
    rope_scaling: RopeScalingSpec | None = None
    parallel_slots: int | None = Field(default=None, ge=1, le=64)
    flash_attention: bool | None = None
    jinja: bool | None = None
    cache_type_k: CacheType | None = None
    cache_type_v: CacheType | None = None
    cache_type_custom_k: str | None = None
    cache_type_custom_v: str | None = None
    moe_cpu_offload: bool | None = Field(default=None, alias="moeCPUOffload")
    moe_cpu_layers: int | None = Field(default=None, ge=0, le=INT32_MAX, alias="moeCPULayers")
    no_kv_offload: bool | None = None
    no_warmup: bool | None = None
    reasoning_budget: int | None = Field(default=None, ge=0, le=INT32_MAX)
    reasoning_budget_message: str | None = None
    metadata_overrides: list[str] | None = None
    tensor_overrides: list[str] | None = None
    batch_size: int | None = Field(default=None, ge=1, le=16384)
    u_batch_size: int | None = Field(default=None, ge=1, le=INT32_MAX)
    extra_args: list[str] | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[KubeObject] | None = None
    container_port: int | None = Field(default=None, ge=1, le=65535)
    probe_overrides: ProbeOverrides | None = None
    skip_model_init: bool | None = None
    persona_plex_config: PersonaPlexConfig | None = None
    vllm_config: VLLMConfig | None = None
    tgi_config: TGIConfig | None = None
    image_pull_secrets: list[KubeObject] | None = None
    priority: Priority | None = "normal"
    priority_class_name: str | None = None
    eviction_protection: bool | None = None
    pod_security_context: KubeObject | None = None
    security_context: KubeObject | None = None
    # -- v0.9 (llmkube/api/isvc_additions.py; docs/compatibility.md says what each does here) -----
    mode: ServingMode | None = None
    suspend: bool | None = None
    revision_history_limit: int | None = Field(default=None, ge=0, le=INT32_MAX)
    topology_spread_constraints: list[KubeObject] | None = None
    affinity: KubeObject | None = None
    speculative_decoding: SpeculativeDecodingSpec | None = None
    turbo_quant_bits: Literal[3, 6, 8] | None = None
    paged_ssd_cache_dir: str | None = Field(default=None, alias="pagedSSDCacheDir")
    hot_cache_max_size: str | None = None
    paged_ssd_cache_max_size: str | None = Field(default=None, alias="pagedSSDCacheMaxSize")
    extra_volumes: list[KubeObject] | None = None
    extra_volume_mounts: list[KubeObject] | None = None
    bind_address: str | None = None
    model_cache: ModelCacheSpec | None = None
    sglang_config: SGLangConfig | None = None
    disruption: DisruptionSpec | None = None
    rollout_policy: RolloutPolicySpec | None = None
    slo: SLOSpec | None = None
    max_pod_lifetime_seconds: int | None = Field(default=None, ge=1, le=2**63 - 1)
    max_pod_lifetime_idle_timeout_seconds: int | None = Field(default=None, ge=0, le=2**63 - 1)


class InferenceServiceStatus(ApiModel):
    phase: Phase | None = None
    conditions: list[Condition] | None = None
    replicas: int | None = None
    ready_replicas: int | None = None
    desired_replicas: int | None = None
    endpoint: str | None = None
    model_ready: bool | None = None
    effective_priority: int | None = None
    queue_position: int | None = None
    scheduling_status: str | None = None
    scheduling_message: str | None = None
    waiting_for: str | None = None
    last_updated: datetime | None = None
    # -- v0.9 ---------------------------------------------------------------------------------------
    mode: str | None = None
    acceleration: KubeObject | None = None
    gateway: KubeObject | None = None


class InferenceService(ApiModel):
    api_version: str | None = API_VERSION
    kind: str | None = ISVC_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: InferenceServiceSpec
    status: InferenceServiceStatus | None = None
