"""What the user commands show, as plain data computed from raw API objects (pure, no I/O).

Rendering (tables, colours) lives in `render.py`; these functions decide what each column says, so
they are tested one rule at a time: QUEUE is blank when a service is not queued, REASON names why
a service failed or waits, AGE reads like kubectl's.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

Obj = Mapping[str, Any]

WAITING_FOR_GPU = "WaitingForGPU"


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kubectl's HumanDuration: `45s`, `3m20s`, `17m`, `2h5m`, `30h`, `3d4h`, `40d`, `2y10d`."""
    total = int(max(0.0, seconds))
    minutes, hours, days = total // 60, total // 3600, total // 86400
    if total < 120:
        return f"{total}s"
    if minutes < 10:
        rest = total % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years, rest_days = days // 365, days % 365
    return f"{years}y{rest_days}d" if years < 8 and rest_days else f"{years}y"


def age(obj: Obj, now: datetime) -> str:
    created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    return human_duration((now - created).total_seconds()) if created else ""


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _status(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def conditions(obj: Obj) -> dict[str, Mapping[str, Any]]:
    return {c.get("type", ""): c for c in _status(obj).get("conditions") or [] if isinstance(c, Mapping)}


def service_reason(isvc: Obj) -> str:
    """Why the service is not simply serving: the failure's reason for Failed (InvalidSpec,
    ModelNotFound, ...), the scheduler's diagnosis while pods wait, else nothing."""
    status = _status(isvc)
    if status.get("phase") == "Failed":
        degraded = conditions(isvc).get("Degraded") or {}
        return str(degraded.get("reason") or status.get("schedulingStatus") or "Failed")
    return str(status.get("schedulingStatus") or "")


def queue_column(isvc: Obj) -> str:
    """The GPU queue position, blank (not 0) for a service that is not queued."""
    status = _status(isvc)
    position = status.get("queuePosition")
    if status.get("phase") != WAITING_FOR_GPU or not isinstance(position, int) or position <= 0:
        return ""
    return str(position)


def replicas_column(isvc: Obj) -> str:
    status = _status(isvc)
    ready = status.get("readyReplicas") or 0
    desired = status.get("desiredReplicas")
    if desired is None:
        desired = _spec(isvc).get("replicas", 1)
    return f"{ready}/{desired}"


@dataclass(frozen=True)
class ServiceRow:
    namespace: str
    name: str
    model: str
    phase: str
    reason: str
    replicas: str
    queue: str
    priority: str
    endpoint: str
    age: str


def service_row(isvc: Obj, now: datetime) -> ServiceRow:
    status, spec = _status(isvc), _spec(isvc)
    return ServiceRow(
        namespace=str(_meta(isvc).get("namespace") or ""),
        name=str(_meta(isvc).get("name") or ""),
        model=str(spec.get("modelRef") or ""),
        phase=str(status.get("phase") or "Unknown"),
        reason=service_reason(isvc),
        replicas=replicas_column(isvc),
        queue=queue_column(isvc),
        priority=str(spec.get("priorityClassName") or spec.get("priority") or "normal"),
        endpoint=str(status.get("endpoint") or ""),
        age=age(isvc, now),
    )


@dataclass(frozen=True)
class ModelRow:
    namespace: str
    name: str
    phase: str
    size: str
    quantization: str
    architecture: str
    accelerator: str
    age: str


def model_row(model: Obj, now: datetime) -> ModelRow:
    status, spec = _status(model), _spec(model)
    gguf = status.get("gguf") or {}
    hardware = spec.get("hardware") or {}
    size = status.get("size")
    return ModelRow(
        namespace=str(_meta(model).get("namespace") or ""),
        name=str(_meta(model).get("name") or ""),
        phase=str(status.get("phase") or "Unknown"),
        size="" if size in (None, "", "0") else str(size),
        quantization=str(gguf.get("quantization") or spec.get("quantization") or ""),
        architecture=str(gguf.get("architecture") or ""),
        accelerator=str(hardware.get("accelerator") or "cpu"),
        age=age(model, now),
    )


@dataclass(frozen=True)
class QueueRow:
    position: int
    namespace: str
    name: str
    priority: str
    effective_priority: str
    waiting_for: str
    waiting: str
    #: why it waits: the scheduler's reason, or a GPUQuota's (QuotaExceeded: which quota, what it needs)
    reason: str = ""


def queue_reason(status: Obj) -> str:
    reason = str(status.get("schedulingStatus") or "")
    if reason == "QuotaExceeded" and status.get("schedulingMessage"):
        return f"{reason}: {status['schedulingMessage']}"
    return reason


def _waiting_since(isvc: Obj) -> datetime | None:
    """When the service started waiting: GPUAvailable turned False then (it only changes time
    when its status flips)."""
    condition = conditions(isvc).get("GPUAvailable") or {}
    return parse_time(condition.get("lastTransitionTime"))


def queue_rows(services: Iterable[Obj], now: datetime) -> list[QueueRow]:
    """Services waiting for GPUs, in the controller's queue order (its stored positions; services
    without one yet go last, oldest first)."""
    waiting = [s for s in services if _status(s).get("phase") == WAITING_FOR_GPU]

    def order(isvc: Obj) -> tuple[int, str]:
        position = _status(isvc).get("queuePosition")
        rank = position if isinstance(position, int) and position > 0 else 1 << 30
        return rank, str(_meta(isvc).get("creationTimestamp") or "")

    rows = []
    for index, isvc in enumerate(sorted(waiting, key=order), start=1):
        status, spec = _status(isvc), _spec(isvc)
        since = _waiting_since(isvc) or parse_time(_meta(isvc).get("creationTimestamp"))
        position = status.get("queuePosition")
        effective = status.get("effectivePriority")
        rows.append(
            QueueRow(
                position=position if isinstance(position, int) and position > 0 else index,
                namespace=str(_meta(isvc).get("namespace") or ""),
                name=str(_meta(isvc).get("name") or ""),
                priority=str(spec.get("priorityClassName") or spec.get("priority") or "normal"),
                effective_priority="" if effective is None else str(effective),
                waiting_for=str(status.get("waitingFor") or ""),
                waiting=human_duration((now - since).total_seconds()) if since else "",
                reason=queue_reason(status),
            )
        )
    return rows


@dataclass(frozen=True)
class EventRow:
    type: str
    reason: str
    kind: str
    age: str
    count: int
    message: str


def _event_time(event: Obj) -> datetime | None:
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        _meta(event).get("creationTimestamp"),
    ):
        found = parse_time(value)
        if found is not None:
            return found
    return None


def event_rows(events: Iterable[Obj], now: datetime, *, limit: int = 10) -> list[EventRow]:
    """The most recent events (core/v1 shape, which also carries events.k8s.io/v1 ones), oldest
    first like `kubectl describe`."""
    dated = [(time, event) for event in events if (time := _event_time(event)) is not None]
    dated.sort(key=lambda pair: pair[0])
    rows = []
    for time, event in dated[-limit:]:
        series = event.get("series") or {}
        count = series.get("count") or event.get("count") or 1
        involved = event.get("involvedObject") or event.get("regarding") or {}
        rows.append(
            EventRow(
                type=str(event.get("type") or ""),
                reason=str(event.get("reason") or ""),
                kind=str(involved.get("kind") or ""),
                age=human_duration((now - time).total_seconds()),
                count=int(count) if isinstance(count, int) else 1,
                message=str(event.get("message") or event.get("note") or ""),
            )
        )
    return rows


@dataclass(frozen=True)
class ConditionRow:
    kind: str
    type: str
    status: str
    reason: str
    message: str
    age: str


def condition_rows(kind: str, obj: Obj | None, now: datetime) -> list[ConditionRow]:
    rows = []
    for condition in conditions(obj or {}).values():
        since = parse_time(condition.get("lastTransitionTime"))
        rows.append(
            ConditionRow(
                kind=kind,
                type=str(condition.get("type") or ""),
                status=str(condition.get("status") or ""),
                reason=str(condition.get("reason") or ""),
                message=str(condition.get("message") or ""),
                age=human_duration((now - since).total_seconds()) if since else "",
            )
        )
    return rows


def waits_for(isvc: Obj, model: Obj | None) -> str:
    """One sentence: what the service is waiting for, or "" when it is not waiting."""
    status = _status(isvc)
    phase = status.get("phase")
    if phase == "Pending":
        if model is None:
            return f'the Model "{_spec(isvc).get("modelRef")}" (it does not exist)'
        model_phase = _status(model).get("phase") or "Pending"
        if model_phase == "Ready":
            return ""  # the controller has not acted on it yet: nothing the user waits for
        return f'the Model "{_meta(model).get("name")}" to be Ready (it is {model_phase})'
    if phase == WAITING_FOR_GPU:
        position = queue_column(isvc)
        where = f" (queue position {position})" if position else ""
        return f"GPUs: {status.get('waitingFor') or 'a GPU'}{where}"
    if phase == "Creating":
        available = conditions(isvc).get("Available") or {}
        return str(available.get("message") or "the first replica to become ready")
    return ""


def service_summary(isvc: Obj, model: Obj | None) -> list[tuple[str, str]]:
    """The service's key facts as (label, value) pairs, in reading order."""
    status, spec = _status(isvc), _spec(isvc)
    priority = str(spec.get("priorityClassName") or spec.get("priority") or "normal")
    effective = status.get("effectivePriority")
    pairs = [
        ("Phase", str(status.get("phase") or "Unknown")),
        ("Reason", service_reason(isvc)),
        ("Model", str(spec.get("modelRef") or "")),
        ("Runtime", str(spec.get("runtime") or "llamacpp")),
        ("Replicas", f"{replicas_column(isvc)} ready"),
        ("Endpoint", str(status.get("endpoint") or "")),
        ("Priority", f"{priority} ({effective})" if effective is not None else priority),
        ("Queue position", queue_column(isvc)),
        ("Waiting for", waits_for(isvc, model)),
        ("Memory", memory_fit_text(isvc)),
    ]
    return [(label, value) for label, value in pairs if value]


def memory_fit_text(isvc: Obj) -> str:
    """The MemoryFit condition in one line: the verdict first, then the figures."""
    fit = conditions(isvc).get("MemoryFit")
    if not fit:
        return ""
    verdict = {"True": "fits", "False": "may NOT fit"}.get(str(fit.get("status")), "unknown")
    return f"{verdict}: {fit.get('message') or fit.get('reason') or ''}"


def model_summary(model: Obj) -> list[tuple[str, str]]:
    status, spec = _status(model), _spec(model)
    gguf = status.get("gguf") or {}
    hardware = spec.get("hardware") or {}
    size = status.get("size")
    pairs = [
        ("Phase", str(status.get("phase") or "Unknown")),
        ("Source", str(spec.get("source") or "")),
        ("Size", "" if size in (None, "", "0") else str(size)),
        ("Quantization", str(gguf.get("quantization") or spec.get("quantization") or "")),
        ("Architecture", str(gguf.get("architecture") or "")),
        ("Name in file", str(gguf.get("modelName") or "")),
        ("Layers", _text(gguf.get("layerCount"))),
        ("Context length", _text(gguf.get("contextLength"))),
        ("Accelerator", str(hardware.get("accelerator") or "cpu")),
    ]
    return [(label, value) for label, value in pairs if value]


def _text(value: object) -> str:
    return "" if value is None else str(value)


def sort_by_name(objects: Sequence[Obj]) -> list[Obj]:
    return sorted(objects, key=lambda o: (str(_meta(o).get("namespace")), str(_meta(o).get("name"))))


POD_HEADERS = ("POD", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE")


def pod_row(pod: Obj, now: datetime) -> tuple[str, ...]:
    """One replica as `kubectl get pods -o wide` shows it (the reason of a waiting container first)."""
    status = _status(pod)
    containers = list(status.get("containerStatuses") or [])
    ready = sum(1 for c in containers if c.get("ready"))
    shown = str(status.get("phase") or "Pending")
    for container in [*(status.get("initContainerStatuses") or []), *containers]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and not container.get("ready"):
            shown = str(waiting["reason"])
            break
    if _meta(pod).get("deletionTimestamp"):
        shown = "Terminating"
    restarts = sum(int(c.get("restartCount") or 0) for c in containers)
    total = len(_spec(pod).get("containers") or []) or len(containers)
    return (
        str(_meta(pod).get("name") or ""),
        f"{ready}/{total}",
        shown,
        str(restarts),
        age(pod, now),
        str(status.get("podIP") or "<none>"),
        str(_spec(pod).get("nodeName") or "<none>"),
    )
