"""A failed write of one of an InferenceService's objects, carried with what was being written, and
turned into the status message and Event the user reads (the wording is
plan/inferenceservice/write_failures.py)."""

import contextlib
from collections.abc import Iterator

from llmkube.api.inferenceservice import InferenceService
from llmkube.kube.apply import NotOurs
from llmkube.kube.errors import ApiError
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.status import FAILED_REASON
from llmkube.plan.inferenceservice.write_failures import (
    WRITE_FAILED_EVENT,
    RefusedField,
    WriteFailure,
    write_failure,
)


class WriteFailed(Exception):
    """Writing `kind` (the object `sent`) failed with `error`."""

    def __init__(self, kind: str, sent: Obj | None, error: ApiError) -> None:
        super().__init__(f"{kind}: {error}")
        self.kind = kind
        self.sent = sent
        self.error = error


def describe_write_failure(isvc: InferenceService, failure: WriteFailed) -> WriteFailure:
    error = failure.error
    if isinstance(error, NotOurs):  # our own refusal to take over someone else's object
        return WriteFailure(FAILED_REASON, WRITE_FAILED_EVENT, error.message)
    return write_failure(
        failure.kind,
        isvc.spec,
        failure.sent,
        code=error.status,
        api_reason=error.reason,
        api_message=error.message,
        causes=[RefusedField(cause.field, cause.message) for cause in error.causes],
    )


@contextlib.contextmanager
def writing(kind: str, sent: Obj | None) -> Iterator[None]:
    """An API error raised in the block becomes a WriteFailed naming what was being written."""
    try:
        yield
    except ApiError as error:
        raise WriteFailed(kind, sent, error) from error
