"""Mistakes and refusals the user commands report as one clear line (exit status 1)."""

from llmkube.kube.errors import ApiError, Forbidden, NotFound, Unauthorized


class UserError(Exception):
    """Something the user can act on; the message says what and, where it helps, how."""


class NotFoundError(UserError):
    """A name the cluster does not have: or the kinds themselves missing, which the command
    runner asks discovery about before it says so (crds_check.py)."""


def explain(error: ApiError, what: str) -> UserError:
    """An API error in the user's terms: which object, and why (decided by the error's type)."""
    if isinstance(error, NotFound):
        return NotFoundError(f"{what} not found")
    if isinstance(error, Forbidden):
        return UserError(f"not allowed: {error.message}")
    if isinstance(error, Unauthorized):
        return UserError("the cluster did not accept your credentials (check your kubeconfig)")
    return UserError(f"{what}: {error.message or error}")
