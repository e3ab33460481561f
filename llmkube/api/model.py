"""Model (`mdl`): where the weights come from, and what the controller found there.

The fields and their meaning are the reference operator's (LLMKube v0.9's Model kind), so its Model
YAML applies unchanged: `files`, `mmproj`, `sourceSecretRef`, `prefetch`, `status.stagedFiles`.
Fields it lacks are llmkube additions, marked as such.
"""

from datetime import datetime
from typing import Literal

from pydantic import Field

from llmkube.api.base import ApiModel, KubeObject
from llmkube.api.constants import API_VERSION, MODEL_KIND
from llmkube.api.enums import (
    Accelerator,
    GPURuntime,
    GPUVendor,
    ModelFormat,
    ModelPhase,
    RefreshPolicy,
    ShardingStrategy,
)
from llmkube.api.isvc_additions import QUALIFIED_KEY_PATTERN
from llmkube.api.meta import Condition, ObjectMeta

# http(s)://, file://, pvc://, hf://, s3://, gs:// (an llmkube addition), an absolute path without
# whitespace, or a HuggingFace repo id.
SOURCE_PATTERN = r"^(https?://\S+|file://\S+|pvc://\S+|hf://\S+|s3://\S+|gs://\S+|/\S*|[a-zA-Z0-9][\w\-./]+)$"
# What `files` and `mmproj` may hold (a repository- or prefix-relative path); the planner says
# what is wrong with one in words (plan/model/fileset.py), the schema only bounds it.
MAX_FILES = 256
MAX_FILE_PATH = 1024
SHA256_PATTERN = r"^[a-fA-F0-9]{64}$"
# An IAM role's ARN (any partition: aws, aws-cn, aws-us-gov).
ROLE_ARN_PATTERN = r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]+$"
DEFAULT_WEB_IDENTITY_AUDIENCE = "sts.amazonaws.com"


class ShardingSpec(ApiModel):
    strategy: ShardingStrategy | None = "layer"
    layer_split: list[str] | None = None


class GPUSpec(ApiModel):
    enabled: bool | None = None
    count: int | None = Field(default=None, ge=0, le=8)
    memory: str | None = None
    vendor: GPUVendor | None = "nvidia"
    layers: int | None = Field(default=None, ge=-1)
    sharding: ShardingSpec | None = None
    # -- v0.9 ---------------------------------------------------------------------------------------
    #: the extended resource to request instead of the vendor's (amd.com/gpu, squat.ai/dri-render)
    resource_name: str | None = Field(default=None, pattern=QUALIFIED_KEY_PATTERN)
    #: the taint key GPU pods tolerate instead of the resource name
    toleration_key: str | None = Field(default=None, pattern=QUALIFIED_KEY_PATTERN)
    #: the GPU compute backend: the llama.cpp image built for it
    runtime: GPURuntime | None = None
    #: DRA claims (corev1.PodResourceClaim) instead of an extended resource
    resource_claims: list[KubeObject] | None = Field(default=None, max_length=16)


class HardwareSpec(ApiModel):
    accelerator: Accelerator | None = "cpu"
    gpu: GPUSpec | None = None
    memory_budget: str | None = None
    memory_fraction: float | None = Field(default=None, ge=0, le=1)


class ModelResources(ApiModel):
    cpu: str | None = None
    memory: str | None = None


class LocalObjectReference(ApiModel):
    """corev1.LocalObjectReference: an object of the Model's own namespace, by name."""

    name: str | None = ""


class WebIdentity(ApiModel):
    """An s3:// source read with the pod's own identity (an llmkube addition): a ServiceAccount
    token of the audience, projected into the downloader, exchanged with STS
    (AssumeRoleWithWebIdentity) for temporary keys of the role, as IRSA and workload identity
    federation do."""

    role_arn: str = Field(pattern=ROLE_ARN_PATTERN, max_length=2048)
    audience: str | None = Field(default=DEFAULT_WEB_IDENTITY_AUDIENCE, min_length=1, max_length=256)


class ModelSpec(ApiModel):
    source: str = Field(pattern=SOURCE_PATTERN)
    sha256: str | None = Field(default=None, pattern=SHA256_PATTERN)
    #: a Secret of the Model's namespace whose keys go to the model downloader only (HF_TOKEN;
    #: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL)
    source_secret_ref: LocalObjectReference | None = None
    refresh_policy: RefreshPolicy | None = "IfNotPresent"
    #: download into the namespace's cache before any InferenceService exists (remote sources)
    prefetch: bool | None = None
    format: ModelFormat | None = "gguf"
    quantization: str | None = None
    hardware: HardwareSpec | None = None
    resources: ModelResources | None = None
    #: repository- or prefix-relative files to stage from the source; the first is the one the
    #: runtime loads (a sharded GGUF's first shard)
    files: list[str] | None = Field(default=None, max_length=MAX_FILES)
    #: a multimodal projector to stage beside the model (llama.cpp's --mmproj)
    mmproj: str | None = Field(default=None, max_length=MAX_FILE_PATH)
    # -- llmkube additions ------------------------------------------------------------------------
    #: s3:// with the pod's identity instead of (or besides) the Secret's keys
    web_identity: WebIdentity | None = None


class GGUFMetadata(ApiModel):
    architecture: str | None = None
    model_name: str | None = None
    quantization: str | None = None
    context_length: int | None = None
    embedding_size: int | None = None
    layer_count: int | None = None
    head_count: int | None = None
    # What the memory-fit estimate needs beyond the reference's fields (llmkube additions).
    head_count_kv: int | None = Field(default=None, alias="headCountKV")
    key_length: int | None = None
    value_length: int | None = None
    vocab_size: int | None = None
    tensor_bytes: int | None = None
    tensor_count: int | None = None
    file_version: int | None = None
    license: str | None = None


class CacheClearStatus(ApiModel):
    """The last `llmkube cache clear` (the annotation inference.llmkube.dev/clear-cache) and what
    became of it (an llmkube addition)."""

    #: the annotation's value this answers: a new value is a new request
    request: str | None = None
    #: Clearing, Cleared, Refilled (a prefetch downloaded the files again since), Refused or Failed
    phase: Literal["Clearing", "Cleared", "Refilled", "Refused", "Failed"] | None = None
    #: the cache directory it is about (<claim>/<cacheKey>/)
    cache_key: str | None = None
    job: str | None = None
    message: str | None = None
    #: when it reached this phase
    time: datetime | None = None


class ModelStatus(ApiModel):
    phase: ModelPhase | None = None
    size: str | None = None
    path: str | None = None
    cache_key: str | None = None
    sha256: str | None = None
    source_e_tag: str | None = Field(default=None, alias="sourceETag")
    source_content_length: int | None = None
    last_revalidated: datetime | None = None
    accelerator_ready: bool | None = None
    gguf: GGUFMetadata | None = None
    #: the repository-relative paths staged in the cache (when spec.files or spec.mmproj are set)
    staged_files: list[str] | None = None
    last_updated: datetime | None = None
    #: the last cache clear asked for (an llmkube addition)
    cache_clear: CacheClearStatus | None = None
    #: the metadata.generation this status describes (an llmkube addition, the kstatus convention)
    observed_generation: int | None = None
    conditions: list[Condition] | None = None


class Model(ApiModel):
    api_version: str | None = API_VERSION
    kind: str | None = MODEL_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ModelSpec
    status: ModelStatus | None = None
