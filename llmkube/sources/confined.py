"""Open a local model source without following a symbolic link out of `--model-local-roots`.

The planner has already checked the path lexically (`llmkube.plan.model.local_roots`). Here the
file system gets its say, and it may have changed since (or change while we look):

1. resolve the path (`realpath`) and require the result to lie under the real path of a root: a
   link inside the roots that points elsewhere inside them (a Hugging Face cache's
   `snapshots/<rev>/model.gguf -> ../../blobs/<sha>`) is fine, one that leads out is refused;
2. open the resolved path one element at a time from the root's directory descriptor with
   `O_NOFOLLOW` (`openat`), so no link is followed by the open itself: a directory or file swapped
   for a link between step 1 and step 2 fails the open instead of being followed.

`O_NONBLOCK` keeps a FIFO from blocking the open (its writer may never come); anything but a
regular file is refused by the callers after `fstat`.
"""

import errno
import os
from collections.abc import Sequence

from llmkube.plan.model.local_roots import is_beneath

__all__ = ["EscapesRoots", "open_beneath_roots"]

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# openat with O_NOFOLLOW on a link: ELOOP; with O_DIRECTORY on a link to a directory: ENOTDIR or ELOOP.
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.ENOTDIR})


class EscapesRoots(OSError):
    """The path resolves (or was swapped to lead) outside every root. `detail` says how."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(errno.EACCES, detail, path)
        self.detail = detail


def _walk(root: str, elements: Sequence[str]) -> int:
    """Open `root/elements...` without following any link below `root`."""
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for element in elements[:-1]:
            inner = os.open(element, _DIRECTORY, dir_fd=directory)
            os.close(directory)
            directory = inner
        return os.open(elements[-1], _FILE, dir_fd=directory)
    finally:
        os.close(directory)


def open_beneath_roots(path: str, roots: Sequence[str]) -> int:
    """A read-only descriptor of `path`, which must resolve to a file under one of `roots` (absolute,
    normalized). Raises EscapesRoots when it does not, or FileNotFoundError & co. as `open` would."""
    resolved = os.path.realpath(path)
    for root in roots:
        real_root = os.path.realpath(root)
        if not is_beneath(resolved, real_root):
            continue
        if resolved == real_root:  # a directory: the caller's fstat refuses it
            return os.open(real_root, os.O_RDONLY | os.O_CLOEXEC)
        elements = resolved[len(real_root) :].strip("/").split("/")
        try:
            return _walk(real_root, elements)
        except OSError as error:
            if error.errno in _LINK_ERRNOS and os.path.lexists(resolved):
                raise EscapesRoots(
                    path, "a path element was replaced by a symbolic link while it was opened"
                ) from error
            raise
    if resolved != os.path.normpath(path):
        raise EscapesRoots(path, f"it resolves to {resolved} through a symbolic link")
    raise EscapesRoots(path, "it is outside the allowed directories")
