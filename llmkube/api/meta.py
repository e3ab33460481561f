"""ObjectMeta and Condition: the two Kubernetes shapes every llmkube kind carries."""

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from llmkube.api.base import ApiModel, OpenModel


class ObjectMeta(OpenModel):
    """The metadata fields llmkube reads; anything else the server sends is kept as extra."""

    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(ApiModel):
    """metav1.Condition: keyed by `type`, `lastTransitionTime` moves only when `status` flips."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    status: ConditionStatus
    reason: str = Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = Field(max_length=32768)
    last_transition_time: datetime
    observed_generation: int | None = Field(default=None, ge=0)
