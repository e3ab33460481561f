"""Which local paths a Model may make the controller read.

A local-path Model (`file://...` or `/...`) is copied by the controller from its own filesystem, so
without a rule any user who may create a Model could have the controller read (and hash, and copy
into the cache) any file the controller sees: its service-account token under
`/var/run/secrets/...`, another tenant's weights. Local sources are therefore confined to the
directories an operator lists in `--model-local-roots`; with none listed (the in-cluster default)
they are refused altogether.

This is the lexical half of the rule (pure, decided by the planner before anything is touched):
an absolute path, no `.` or `..` elements, and under one of the roots. The I/O half
(`llmkube.sources.confined`) then opens the file without following a symbolic link
out of the roots.
"""

import posixpath
from collections.abc import Iterable, Sequence

from llmkube.plan.model.conditions import go_quote

ROOTS_FLAG = "--model-local-roots"


class InvalidLocalRoot(ValueError):
    pass


def normalized_roots(roots: Iterable[str]) -> tuple[str, ...]:
    """The configured roots, normalized (`/data/models/` -> `/data/models`), without duplicates.
    Raises InvalidLocalRoot for a relative root: the rule would depend on the working directory."""
    result: list[str] = []
    for root in roots:
        root = root.strip()
        if not root:
            continue
        if not root.startswith("/"):
            raise InvalidLocalRoot(f"{ROOTS_FLAG}: {root!r} is not an absolute path")
        # POSIX lets normpath keep a leading "//"; the kernel treats it as "/".
        normalized = "/" + posixpath.normpath(root).lstrip("/")
        if normalized not in result:
            result.append(normalized)
    return tuple(result)


def is_beneath(path: str, root: str) -> bool:
    """`path` is `root` itself or inside it, element by element (`/data2` is not inside `/data`)."""
    if root == "/":
        return path.startswith("/")
    return path == root or path.startswith(root + "/")


def _roots_text(roots: Sequence[str]) -> str:
    return ", ".join(roots)


def local_source_violation(source: str, path: str, roots: Sequence[str]) -> str | None:
    """Why the controller must not read `path` (the local path of `spec.source`), or None.

    `roots` are already normalized (`normalized_roots`). The message names the rule and the flag,
    so the person who wrote the Model knows what to ask the operator for."""
    quoted = go_quote(source)
    if not roots:
        return (
            f"spec.source {quoted} is a local path, and local model sources are disabled: the controller "
            f"reads local files only under the directories given with {ROOTS_FLAG} (none are set)"
        )
    elements = path.split("/")
    if not path.startswith("/") or any(element in (".", "..") for element in elements):
        return (
            f"spec.source {quoted} is not allowed: a local model source must be an absolute path "
            'without "." or ".." elements, inside the directories the controller may read local models '
            f"from ({ROOTS_FLAG}: {_roots_text(roots)})"
        )
    if not any(is_beneath(posixpath.normpath(path), root) for root in roots):
        return (
            f"spec.source {quoted} is not allowed: it is outside the directories the controller may "
            f"read local models from ({ROOTS_FLAG}: {_roots_text(roots)})"
        )
    return None


def msg_escapes_roots(path: str, roots: Sequence[str], detail: str) -> str:
    """The I/O half found a symbolic link (or a swapped directory) leading out of the roots."""
    return (
        f"local model source {go_quote(path)} is not allowed: {detail}, and local model sources must stay "
        f"inside the directories the controller may read ({ROOTS_FLAG}: {_roots_text(roots)})"
    )
