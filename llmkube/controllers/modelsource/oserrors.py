"""OSError → a FetchFailure kind: the planner decides retries by kind, never by parsing messages."""

import errno

from llmkube.plan.model import FetchFailure

_BY_ERRNO = {
    errno.ENOENT: FetchFailure.NOT_FOUND,
    errno.ENOTDIR: FetchFailure.NOT_FOUND,
    errno.EACCES: FetchFailure.PERMISSION_DENIED,
    errno.EPERM: FetchFailure.PERMISSION_DENIED,
    errno.EISDIR: FetchFailure.NOT_A_FILE,
}


def fetch_failure_for(error: OSError) -> FetchFailure:
    return _BY_ERRNO.get(error.errno or 0, FetchFailure.IO_ERROR)


def describe(error: OSError) -> str:
    """`No such file or directory` rather than `[Errno 2] No such file or directory: '/x'`."""
    return error.strerror or str(error)
