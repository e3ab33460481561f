"""The pydantic base every API type shares: camelCase on the wire, snake_case in Python."""

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

# Kubernetes sub-objects we pass through untouched (env, tolerations, probes, security contexts):
# the API server validates them, and a full model would add nothing but drift from upstream.
KubeObject = dict[str, Any]


class ApiModel(BaseModel):
    """A closed object (`additionalProperties: false` in the contract): unknown fields are errors."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=True,
    )

    def to_json(self) -> dict[str, Any]:
        """The object as the API server would store it: camelCase, only the fields that were set."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class OpenModel(ApiModel):
    """An object whose extra fields we keep but do not interpret (metadata, foreign status)."""

    model_config = ConfigDict(extra="allow")
