"""Why scheduled pods do not come up, from the container statuses the kubelet reports.

`scheduling.py` explains pods that wait for a node; this explains pods that have one but cannot run:
an image the node cannot get, a container that keeps crashing, a model download that fails. Each
is a state the kubelet itself has given up retrying quickly (it backs off), so it is reported at
once and precisely instead of as an endless `Creating`:

  image     ErrImageNeverPull, ImagePullBackOff, InvalidImageName, ErrImagePull (waiting reasons)
  config    CreateContainerConfigError, CreateContainerError (a missing Secret key, a bad mount, ...)
  crash     CrashLoopBackOff, with the last exit code and, thanks to the containers'
            `terminationMessagePolicy: FallbackToLogsOnError`, the last line the process wrote
  download  the `model-downloader` init container exited non-zero (a 404 is curl's exit 22);
            any other init container likewise

The message names the container and the cause, and leaves out what changes on every retry
(restart counts, timestamps), so an unchanged failure produces an unchanged status.

Pods that cannot even be created (an admission plugin refuses them: Pod Security, a ResourceQuota,
a policy engine) leave no pod to look at: the ReplicaSet records the refusal, and the Deployment
controller copies it into the Deployment's `ReplicaFailure` condition (reason `FailedCreate`, the
API server's message). `replica_failure` reads it from there, whatever the admission plugin.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmkube.plan.inferenceservice.storage import INIT_CONTAINER_NAME

MODEL_DOWNLOAD_FAILED = "ModelDownloadFailed"
FAILED_CREATE = "FailedCreate"
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
    state = container.get("state") or {}
    waiting = state.get("waiting") or {}
    reason = str(waiting.get("reason") or "")
    what = f"init container {name}" if init else f"container {name}"
    if reason in IMAGE_REASONS or reason in CONFIG_REASONS:
        detail = str(waiting.get("message") or "").strip()
        return PodFailure(reason, f"{what}: {reason}" + (f": {detail}" if detail else ""))
    if init:
        return _init_failure(container, name, what)
    last = (container.get("lastState") or {}).get("terminated") or {}
    # A loop, not one crash: the kubelet says so while it backs off; between two attempts (running,
    # not ready) the restart count and the last exit tell the same, so the status does not flap.
    looping = reason == CRASH_LOOP or (
        "running" in state
        and not container.get("ready")
        and int(container.get("restartCount") or 0) >= 2
        and _failed(last)
    )
    if not looping:
        return None
    return PodFailure(CRASH_LOOP, f"{what} keeps failing ({CRASH_LOOP})" + _termination(last))


def _init_failure(container: Mapping[str, Any], name: str, what: str) -> PodFailure | None:
    """An init container that exited non-zero holds the pod back until a retry succeeds. The kubelet
    shows the failure as the current state, then (backing off, retrying) as the last one: report
    the same failure in all three, so the status stays put while nothing changes."""
    state = container.get("state") or {}
    current = state.get("terminated") or {}
    last = (container.get("lastState") or {}).get("terminated") or {}
    # A current termination decides (exit 0: done, whatever failed before); else the last one.
    failure = current or last
    if not _failed(failure):
        return None
    reason = MODEL_DOWNLOAD_FAILED if name == INIT_CONTAINER_NAME else INIT_CONTAINER_FAILED
    return PodFailure(reason, f"{what} failed" + _termination(failure))


def _failed(terminated: Mapping[str, Any]) -> bool:
    return bool(terminated) and int(terminated.get("exitCode") or 0) != 0


def _termination(terminated: Mapping[str, Any]) -> str:
    """`: exit code N (OOMKilled): <last log line>`, from what is known."""
    text = ""
    if "exitCode" in terminated:
        text += f": exit code {terminated['exitCode']}"
    if terminated.get("reason") and terminated.get("reason") not in ("Error", "Completed"):
        text += f" ({terminated['reason']})"  # OOMKilled, ContainerCannotRun, ...
    if line := last_line(str(terminated.get("message") or "")):
        text += f": {line}"
    return text


def last_line(text: str) -> str:
    """The last non-blank line of a log tail (where a process says why it stopped), shortened."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1]
    return line if len(line) <= _MAX_LOG_LINE else line[: _MAX_LOG_LINE - 3] + "..."


def replica_failure(deployment: Mapping[str, Any] | None) -> PodFailure | None:
    """The Deployment's `ReplicaFailure=True` condition: its pods are refused at creation."""
    for condition in ((deployment or {}).get("status") or {}).get("conditions") or ():
        if condition.get("type") == "ReplicaFailure" and condition.get("status") == "True":
            refusal = str(condition.get("message") or "no reason given")
            return PodFailure(FAILED_CREATE, f"the pods of this service cannot be created: {refusal}")
    return None
