"""Drain before a pod goes: it takes no new requests, finishes those it holds, then stops.

Opt-in per service with the annotation `inference.llmkube.dev/rollout: drain` (and
`inference.llmkube.dev/rollout-drain-timeout`: seconds, or `90s`, `5m`, `1h`), or with the
reference's v0.9 `spec.rolloutPolicy` (`waitForIdle: true`, `idleTimeoutSeconds`, default 300;
`force: true` turns it off): the reference defers the new template until the replicas are idle,
llmkube lets each old pod finish its requests before it stops, which is what that asks for.
The annotations win where both are given. Kubernetes already
stops sending new connections to a pod that is being deleted, and keeps the established ones; what
it lacks is a server that waits for its requests before it exits. So the pod gets a preStop hook
(run by the kubelet in the server's container, only while the pod terminates, bounded by the
timeout) that reads the server's own gauges of requests being generated and waiting, and ends when
they are 0 or when the timeout passes; the kubelet then stops the server. Nobody polls a pod that is
not draining, and the state of a drain is the pod's: a controller restart loses nothing.

- RollingUpdate (CPU): the new pod becomes Ready first, then the old one is deleted and drains
  while the new one takes every new request.
- Recreate (GPU: the old pod must free the device): the old pod is the only endpoint, and kube-proxy
  keeps sending new connections to a terminating pod when a Service has no other. While a pod of
  such a service drains, the Service selects no pod (`HOLD_LABEL`), so new requests are refused
  (a router retries them) instead of landing on a server about to stop; the selector comes back once
  the old pods are gone. The hook waits `RECREATE_SETTLE_SECONDS` before its first reading, long
  enough for the held selector to reach kube-proxy, so no request arrives after an idle reading.

While a pod drains the `Draining` condition is True and names it and its deadline. A pod still
there at its deadline was cut by the timeout: `DrainTimedOut` (a Warning Event), and the kubelet's
own `FailedPreStopHook` Event on the pod carries what the hook saw ("timeout (120 s) reached with 2
requests in flight").
"""

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from llmkube.api.base import KubeObject
from llmkube.api.constants import GROUP
from llmkube.api.meta import Condition
from llmkube.plan.conditions.standard import find_condition, set_condition
from llmkube.plan.events import PlannedEvent

ROLLOUT_ANNOTATION = f"{GROUP}/rollout"
DRAIN_TIMEOUT_ANNOTATION = f"{GROUP}/rollout-drain-timeout"
DRAIN_VALUE, IMMEDIATE_VALUE = "drain", "immediate"
#: While a Recreate drain runs the Service selects pods with this label: no pod has it.
HOLD_LABEL = f"{GROUP}/drain"
HOLD_VALUE = "holding"

Strategy = Literal["RollingUpdate", "Recreate"]
#: A Recreate drain refuses every new request while it lasts, so its default is shorter: long enough
#: for a 4,000-token generation at 40 tokens/s. A RollingUpdate drain costs only the old pod's
#: resources for longer: the new pods serve meanwhile.
DEFAULT_TIMEOUT: Mapping[Strategy, int] = {"Recreate": 120, "RollingUpdate": 300}
MAX_TIMEOUT = 3600
#: rolloutPolicy.idleTimeoutSeconds when unset or 0 (the reference's)
DEFAULT_IDLE_TIMEOUT = 300
#: Before the hook's first reading: kube-proxy has stopped sending the pod new connections by then.
ROLLING_SETTLE_SECONDS = 2
RECREATE_SETTLE_SECONDS = 5
#: Past the hook, for the server to stop on SIGTERM (the pod's default grace period).
STOP_SECONDS = 30

DRAINING = "Draining"  # the condition
WAITING_FOR_REQUESTS, DRAINED, DRAIN_TIMED_OUT, DRAIN_STARTED = (
    "WaitingForRequests",
    "Drained",
    "DrainTimedOut",
    "DrainStarted",
)
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h)?\s*$")
_UNITS = {None: 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def _annotation_path(name: str) -> str:
    return f"metadata.annotations[{name}]"


@dataclass(frozen=True)
class DrainPolicy:
    enabled: bool
    timeout: int | None = None  # seconds; None: the strategy's default
    #: (field path, message) for values that were not understood: warnings, the defaults apply
    problems: tuple[tuple[str, str], ...] = ()

    def timeout_for(self, strategy: Strategy) -> int:
        return self.timeout if self.timeout is not None else DEFAULT_TIMEOUT[strategy]


def drain_policy(annotations: Mapping[str, str] | None, rollout: Any = None) -> DrainPolicy:
    """`rollout`: the spec's rolloutPolicy (v0.9), read when the annotations say nothing."""
    annotations = annotations or {}
    if (
        rollout is not None
        and ROLLOUT_ANNOTATION not in annotations
        and DRAIN_TIMEOUT_ANNOTATION not in annotations
    ):
        if rollout.force or not rollout.wait_for_idle:
            return DrainPolicy(enabled=False)
        seconds = rollout.idle_timeout_seconds or DEFAULT_IDLE_TIMEOUT
        return DrainPolicy(enabled=True, timeout=min(seconds, MAX_TIMEOUT))
    problems: list[tuple[str, str]] = []
    raw_mode = annotations.get(ROLLOUT_ANNOTATION)
    enabled = False
    if raw_mode is not None:
        value = raw_mode.strip().lower()
        if value in (DRAIN_VALUE, IMMEDIATE_VALUE):
            enabled = value == DRAIN_VALUE
        else:
            problems.append(
                (
                    _annotation_path(ROLLOUT_ANNOTATION),
                    f'"{raw_mode}" is neither "{DRAIN_VALUE}" nor "{IMMEDIATE_VALUE}": pods are not drained',
                )
            )
    timeout: int | None = None
    raw_timeout = annotations.get(DRAIN_TIMEOUT_ANNOTATION)
    if raw_timeout is not None:
        match = _DURATION.match(raw_timeout)
        seconds = float(match[1]) * _UNITS[match[2]] if match else None
        path = _annotation_path(DRAIN_TIMEOUT_ANNOTATION)
        if seconds is None or seconds <= 0:
            problems.append(
                (path, f'"{raw_timeout}" is not a duration like 300, 90s, 5m or 1h: the default applies')
            )
        elif seconds > MAX_TIMEOUT:
            problems.append((path, f'"{raw_timeout}" is more than {MAX_TIMEOUT} s: {MAX_TIMEOUT} s applies'))
            timeout = MAX_TIMEOUT
        else:
            timeout = max(1, math.ceil(seconds))
    return DrainPolicy(enabled=enabled, timeout=timeout, problems=tuple(problems))


def drain_warnings(
    annotations: Mapping[str, str] | None,
    runtime: str,
    in_flight_metrics: Sequence[str],
    rollout: Any = None,
) -> list[tuple[str, str]]:
    """What validation reports as warnings: values not understood, and a drain asked of a runtime
    whose server counts no requests (the hook could never tell when it is done)."""
    policy = drain_policy(annotations, rollout)
    found = list(policy.problems)
    if rollout is not None and rollout.idle_timeout_seconds and rollout.idle_timeout_seconds > MAX_TIMEOUT:
        found.append(
            ("spec.rolloutPolicy.idleTimeoutSeconds", f"more than {MAX_TIMEOUT} s: {MAX_TIMEOUT} s applies")
        )
    if policy.enabled and not in_flight_metrics:
        asked = annotations is not None and ROLLOUT_ANNOTATION in annotations
        found.append(
            (
                _annotation_path(ROLLOUT_ANNOTATION) if asked else "spec.rolloutPolicy.waitForIdle",
                f'runtime "{runtime}" exports no count of requests in flight: its pods are not drained',
            )
        )
    return found


# The preStop hook, in POSIX sh (Debian's dash, Ubuntu's, busybox) with curl or wget and awk, which
# the runtimes' images carry. Arguments: port, timeout, settle seconds, the gauges to sum. It sums
# every sample of the named gauges (all label sets); a page without them, or no answer, cannot tell:
# it stops at once, and says so. The gauges count requests being generated: a server that has just
# generated the last token may still be sending it, hence two idle readings a second apart. A
# non-zero exit is the kubelet's FailedPreStopHook Event on the pod, what the hook printed its message.
HOOK_SCRIPT = r"""port=$1 timeout=$2 settle=$3; shift 3
url="http://127.0.0.1:$port/metrics"
count() {
  { curl -fsS -m 2 "$url" 2>/dev/null || wget -q -T 2 -O - "$url" 2>/dev/null; } | awk -v names="$*" '
    BEGIN { n = split(names, list, " "); for (i = 1; i <= n; i++) wanted[list[i]] = 1 }
    /^#/ { next }
    {
      name = $0; sub(/[ {].*/, "", name); if (!(name in wanted)) next
      rest = $0
      if (index(rest, "{") == length(name) + 1) sub(/^.*\}/, "", rest); else sub(/^[^ ]*/, "", rest)
      split(rest, fields, " "); total += fields[1]; found = 1
    }
    END { if (!found) exit 1; printf "%d\n", total }'
}
sleep "$settle"
deadline=$(( $(date +%s) + timeout )) idle=0
while :; do
  if ! held=$(count "$@"); then
    echo "llmkube drain: cannot read the requests in flight from $url: the server stops now"
    exit 1
  fi
  if [ "$held" -eq 0 ]; then [ "$idle" = 1 ] && exit 0; idle=1; else idle=0; fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    [ "$held" -eq 0 ] && exit 0
    echo "llmkube drain: timeout ($timeout s) reached with $held requests in flight: the server stops now"
    exit 1
  fi
  sleep 1
done
"""


@dataclass(frozen=True)
class DrainHook:
    """What a drained pod template carries: the container's preStop hook and the pod's grace."""

    timeout: int
    settle: int
    port: int
    metrics: tuple[str, ...]

    @property
    def grace_seconds(self) -> int:
        return self.settle + self.timeout + STOP_SECONDS

    def lifecycle(self) -> KubeObject:
        command = ["/bin/sh", "-c", HOOK_SCRIPT, "llmkube-drain", str(self.port), str(self.timeout)]
        return {"preStop": {"exec": {"command": [*command, str(self.settle), *self.metrics]}}}


def drain_hook(
    policy: DrainPolicy, strategy: Strategy, port: int, in_flight_metrics: Sequence[str]
) -> DrainHook | None:
    if not policy.enabled or not in_flight_metrics:
        return None
    settle = RECREATE_SETTLE_SECONDS if strategy == "Recreate" else ROLLING_SETTLE_SECONDS
    return DrainHook(policy.timeout_for(strategy), settle, port, tuple(in_flight_metrics))


# -- what a drain looks like from the pods ---------------------------------------------------------


@dataclass(frozen=True)
class DrainingPod:
    name: str
    deadline: datetime  # when its hook gives up (its deletionTimestamp less the server's stop time)


def draining_pods(pods: Sequence[KubeObject]) -> list[DrainingPod]:
    """The service's pods being deleted whose server still runs (the hook runs in it)."""
    found: list[DrainingPod] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        deleted = _time(meta.get("deletionTimestamp"))
        if deleted is None or not _server_running(pod):
            continue
        found.append(DrainingPod(str(meta.get("name") or ""), deleted - timedelta(seconds=STOP_SECONDS)))
    return sorted(found, key=lambda pod: (pod.deadline, pod.name))


def holds_service(hook: DrainHook | None, strategy: Strategy, pods: Sequence[KubeObject]) -> bool:
    """A Recreate drain in progress: the Service selects no pod until the old ones are gone."""
    return hook is not None and strategy == "Recreate" and any(_terminating(pod) for pod in pods)


@dataclass(frozen=True)
class DrainStatus:
    conditions: list[Condition]
    events: tuple[PlannedEvent, ...] = ()
    requeue_after: float | None = None


def drain_conditions(
    conditions: Sequence[Condition],
    hook: DrainHook | None,
    strategy: Strategy,
    pods: Sequence[KubeObject],
    *,
    generation: int | None,
    now: datetime,
) -> DrainStatus:
    """`Draining` True while a pod drains, `DrainTimedOut` once one is still there past its
    deadline; False `Drained` (or the timeout's account) when none drains any more. A service that
    never drained has no such condition."""
    previous = find_condition(conditions, DRAINING)
    draining = draining_pods(pods) if hook is not None else []
    if not draining:
        if previous is None or previous.status != "True":
            return DrainStatus(list(conditions))
        timed_out = previous.reason == DRAIN_TIMED_OUT
        message = (
            "The last drain was cut by its timeout: see the DrainTimedOut event"
            if timed_out
            else "The old pods finished their requests before they stopped"
        )
        updated = set_condition(
            conditions,
            type_=DRAINING,
            status="False",
            reason=DRAIN_TIMED_OUT if timed_out else DRAINED,
            message=message,
            now=now,
            observed_generation=generation,
        )
        return DrainStatus(updated)
    assert hook is not None
    names = ", ".join(pod.name for pod in draining)
    late = [pod for pod in draining if pod.deadline <= now]
    if late:
        late_names = ", ".join(pod.name for pod in late)
        reason, message = (
            DRAIN_TIMED_OUT,
            f"The drain's timeout ({hook.timeout} s) passed with {late_names} still holding requests: "
            "the server is stopped now",
        )
        event = PlannedEvent("Warning", DRAIN_TIMED_OUT, message, DRAINING)
        requeue = None
    else:
        where = (
            "new requests are refused until the new pod serves (a router retries them)"
            if strategy == "Recreate"
            else "new requests go to the new pods"
        )
        reason = WAITING_FOR_REQUESTS
        holds = "finishes the requests it holds" if len(draining) == 1 else "finish the requests they hold"
        message = (
            f"{names} {holds} before stopping, at the latest at {_format_time(draining[0].deadline)}; {where}"
        )
        event = PlannedEvent("Normal", DRAIN_STARTED, message, DRAINING)
        # Looked at again at the first deadline; a pod that goes sooner wakes the controller itself.
        requeue = max(0.5, (draining[0].deadline - now).total_seconds() + 0.5)
    updated = set_condition(
        conditions,
        type_=DRAINING,
        status="True",
        reason=reason,
        message=message,
        now=now,
        observed_generation=generation,
    )
    return DrainStatus(updated, (event,), requeue)


def _terminating(pod: KubeObject) -> bool:
    return _time((pod.get("metadata") or {}).get("deletionTimestamp")) is not None


def _server_running(pod: KubeObject) -> bool:
    statuses: Any = (pod.get("status") or {}).get("containerStatuses") or ()
    return any(
        isinstance(status, Mapping) and "running" in (status.get("state") or {}) for status in statuses
    )


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _format_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
