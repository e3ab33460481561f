"""What to tell the user when writing one of a service's objects failed.

The planner checks what it builds (plan/inferenceservice/object_checks.py), so the API server
refusing a write is either something the planner could not know (a cluster's admission policy, an
older server's stricter rule) or a defect of ours. Either way the server names the fields it
refused (`details.causes[].field`, paths inside our object); they are mapped back to the
InferenceService field the value came from (plan/inferenceservice/field_origins.py), so the user
reads `spec.env[0].name`, not `spec.template.spec.containers[0].env[2].name`. When every refused
field is one the user wrote, the service is Failed/InvalidSpec like any invalid spec; otherwise
Failed/Failed.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.inferenceservice.field_origins import describe, isvc_field
from llmkube.plan.inferenceservice.status import FAILED_REASON, INVALID_SPEC_REASON

#: Event reasons: a refusal of the user's values, and any other failed write
INVALID_SPEC_EVENT = "InvalidSpec"
WRITE_FAILED_EVENT = "WriteFailed"


@dataclass(frozen=True)
class RefusedField:
    """One `details.causes` entry: the field (a path in the object we sent) and the server's words."""

    field: str
    message: str


@dataclass(frozen=True)
class WriteFailure:
    reason: str  # the Failed status's condition reason
    event_reason: str
    message: str


def write_failure(
    kind: str,
    spec: InferenceServiceSpec,
    sent: KubeObject | None,
    *,
    code: int,
    api_reason: str,
    api_message: str,
    causes: Sequence[RefusedField] = (),
) -> WriteFailure:
    named = [cause for cause in causes if cause.field]
    if code in (400, 422) and named:
        fields = [isvc_field(kind, cause.field, spec, sent) for cause in named]
        message = f"the API server refused the {kind}: " + "; ".join(
            f"{describe(kind, cause.field, spec, sent)}: {cause.message}" for cause in named
        )
        if all(found is not None for found in fields):
            return WriteFailure(INVALID_SPEC_REASON, INVALID_SPEC_EVENT, message)
        return WriteFailure(FAILED_REASON, WRITE_FAILED_EVENT, message)
    detail = f"{code} {api_reason}: {api_message}" if api_reason else f"{code}: {api_message}"
    if 400 <= code < 500:
        return WriteFailure(FAILED_REASON, WRITE_FAILED_EVENT, f"the API server refused the {kind}: {detail}")
    return WriteFailure(FAILED_REASON, WRITE_FAILED_EVENT, f"writing the {kind} failed: {detail}")
