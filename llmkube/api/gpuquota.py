"""GPUQuota (`gq`): a team's cap on the GPUs, and the GPU memory, its InferenceServices may hold.

Field for field the reference operator's v0.9 `GPUQuota` (namespaced; exactly one of `namespaceRef`,
the one namespace it covers, and `selector`, the labels of the namespaces it covers), so its
manifests apply unchanged. The reference enforced it in an admission webhook against the specs; llmkube
enforces it in its GPU queue, replica by replica (plan/quota/decision.py), and its status adds what
the queue knows: the services holding the GPUs, the services waiting on the quota, observedGeneration
and conditions, as on the other kinds. `costBudgetRef` is accepted and ignored, as in the reference
(a CostBudget kind does not exist there either).

The admission policy (manifests/admission/gpuquota_policy.yaml) refuses both or neither of
namespaceRef and selector, and negative counts; the controller checks the same (plan/quota/validation.py).
"""

from datetime import datetime
from typing import Literal

from pydantic import Field

from llmkube.api.base import ApiModel
from llmkube.api.constants import API_VERSION, QUOTA_KIND
from llmkube.api.meta import Condition, ObjectMeta

PriorityName = Literal["critical", "high", "normal", "low", "batch"]
SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class LabelSelectorRequirement(ApiModel):
    key: str
    operator: SelectorOperator
    values: list[str] | None = None


class LabelSelector(ApiModel):
    """metav1.LabelSelector."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class GPUQuotaSpec(ApiModel):
    selector: LabelSelector | None = None
    namespace_ref: str | None = None
    # No bounds here: a negative count is the admission policy's and the validation's to report
    # (a bound here would make the whole object unreadable to the controller).
    gpu_count: int = Field(alias="gpuCount")
    vram_bytes: int | None = Field(default=None, alias="vramBytes")
    min_priority: PriorityName | None = None
    cost_budget_ref: str | None = None


class QuotaHolder(ApiModel):
    """A service holding GPUs under the quota (llmkube's addition)."""

    namespace: str
    name: str
    replicas: int
    gpus: int = Field(alias="gpus")
    vram_bytes: int | None = Field(default=None, alias="vramBytes")


class QuotaWaiter(ApiModel):
    """A service waiting on the quota, in queue order (llmkube's addition)."""

    namespace: str
    name: str
    #: GPUs its next replica needs
    needs_gpus: int = Field(alias="needsGPUs")
    needs_vram_bytes: int | None = Field(default=None, alias="needsVRAMBytes")
    reason: str
    message: str | None = None


class GPUQuotaStatus(ApiModel):
    used_gpu_count: int | None = Field(default=None, alias="usedGPUCount")
    used_vram_bytes: int | None = Field(default=None, alias="usedVRAMBytes")
    #: the reference's count of refused admissions: here, services refused for their priority
    admission_denials: int | None = None
    last_denial: datetime | None = None
    holders: list[QuotaHolder] | None = None
    waiters: list[QuotaWaiter] | None = None
    #: the number of waiters (the printer column)
    waiting: int | None = None
    observed_generation: int | None = None
    last_updated: datetime | None = None
    conditions: list[Condition] | None = None


class GPUQuota(ApiModel):
    api_version: str | None = API_VERSION
    kind: str | None = QUOTA_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: GPUQuotaSpec
    status: GPUQuotaStatus | None = None
