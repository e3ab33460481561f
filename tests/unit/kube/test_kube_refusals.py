"""API refusals told apart by their data: a terminating namespace is not an RBAC problem, and an
object someone else controls is reported as such."""

import pytest

from llmkube.kube.apply import NotOurs
from llmkube.kube.errors import (
    AlreadyExists,
    ApiError,
    FieldCause,
    Forbidden,
    NotFound,
    namespace_terminating,
)


@pytest.mark.parametrize(
    ("error", "terminating"),
    [
        (
            Forbidden(
                403,
                'deployments.apps "a" is forbidden: unable to create new content in namespace ai '
                "because it is being terminated",
                causes=(
                    FieldCause("metadata.namespace", "NamespaceTerminating", "namespace ai is terminating"),
                ),
            ),
            True,
        ),
        # Decided from the cause alone: the same words without it are not taken for it.
        (
            Forbidden(403, "unable to create new content in namespace ai because it is being terminated"),
            False,
        ),
        (Forbidden(403, 'deployments.apps is forbidden: User "x" cannot create resource'), False),
        (NotFound(404, "namespaces ai not found"), False),
    ],
)
def test_namespace_terminating_is_told_apart_from_rbac(error: ApiError, terminating: bool) -> None:
    assert namespace_terminating(error) is terminating


def test_not_ours_is_an_already_exists_naming_the_object_and_the_owner() -> None:
    error = NotOurs("Deployment", "ai", "llama", "InferenceService")
    assert isinstance(error, AlreadyExists)
    assert (error.status, error.reason) == (409, "AlreadyExists")
    assert error.message == "Deployment ai/llama: exists and is not controlled by this InferenceService"
