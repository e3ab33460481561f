"""Why scheduled pods do not come up, from the container statuses the kubelet reports.

`scheduling.py` explains pods that wait for a node; this explains pods that have one but cannot run:
an image the node cannot get, a container that keeps crashing, a model download that fails. Each
is a state the kubelet itself has given up retrying quickly (it backs off), so it is reported at
once and precisely instead of as an endless `Creating`:

  image     ErrImageNeverPull, ImagePullBackOff, InvalidImageName, ErrImagePull (waiting reasons)
  config    CreateContainerConfigError, CreateContainerError (a missing Secret key, a bad mount, ...)
  crash     CrashLoopBackOff, with the last exit code and, thanks to the containers'
            `terminationMessagePolicy: FallbackToLogsOnError`, the last line the process wrote
  download  the same states of the `model-downloader` init container (a 404 is curl's exit 22)

The message names the container and the cause, and leaves out what changes on every retry
(restart counts, timestamps), so an unchanged failure produces an unchanged status.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmkube.plan.storage import INIT_CONTAINER_NAME

MODEL_DOWNLOAD_FAILED = "ModelDownloadFailed"
INIT_CONTAINER_FAILED = "InitContainerFailed"
CRASH_LOOP = "CrashLoopBackOff"
IMAGE_REASONS = frozenset({"ErrImageNeverPull", "ImagePullBackOff", "InvalidImageName", "ErrImagePull"})
CONFIG_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError"})
_MAX_LOG_LINE = 300


@dataclass(frozen=True)
class PodFailure:
    reason: str  # a condition reason (CamelCase)
    message: str


def diagnose_pod_failure(pods: Sequence[Mapping[str, Any]]) -> PodFailure | None:
    """The first failing container of the first live pod that has one (pods by name, init
    containers before the others, as they run), or None when nothing is stuck."""
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    for pod in sorted(live, key=lambda p: str((p.get("metadata") or {}).get("name", ""))):
        status = pod.get("status") or {}
        for init in status.get("initContainerStatuses") or ():
            if failure := _container_failure(init, init=True):
                return failure
        for container in status.get("containerStatuses") or ():
            if failure := _container_failure(container, init=False):
                return failure
    return None


def _container_failure(container: Mapping[str, Any], *, init: bool) -> PodFailure | None:
    name = str(container.get("name", ""))
    waiting = (container.get("state") or {}).get("waiting") or {}
    reason = str(waiting.get("reason") or "")
    what = f"init container {name}" if init else f"container {name}"
    if reason in IMAGE_REASONS or reason in CONFIG_REASONS:
        detail = str(waiting.get("message") or "").strip()
        return PodFailure(reason, f"{what}: {reason}" + (f": {detail}" if detail else ""))
    if reason != CRASH_LOOP:
        return None
    last = (container.get("lastState") or {}).get("terminated") or {}
    message = f"{what} keeps failing ({CRASH_LOOP})"
    if "exitCode" in last:
        message += f": exit code {last['exitCode']}"
    if last.get("reason") and last.get("reason") not in ("Error", "Completed"):
        message += f" ({last['reason']})"  # OOMKilled, ContainerCannotRun, ...
    if line := last_line(str(last.get("message") or "")):
        message += f": {line}"
    if not init:
        return PodFailure(CRASH_LOOP, message)
    return PodFailure(
        MODEL_DOWNLOAD_FAILED if name == INIT_CONTAINER_NAME else INIT_CONTAINER_FAILED, message
    )


def last_line(text: str) -> str:
    """The last non-blank line of a log tail (where a process says why it stopped), shortened."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1]
    return line if len(line) <= _MAX_LOG_LINE else line[: _MAX_LOG_LINE - 3] + "..."
