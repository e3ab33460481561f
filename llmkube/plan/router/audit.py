"""The audit line of one request: one JSON object, always the same keys (null when unknown), so a
log pipeline can index them. The body only when `auditLog.includeRequestBody` asks for it; a
client's key is named by the key of the Secret that holds it, never by its value. The record is made
once a request is over (llmkube.plan.router.outcome)."""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from llmkube.plan.router.usage import Usage
from llmkube.plan.router.value import value


@value
class AuditRecord:
    router: str
    namespace: str
    request_id: str
    path: str
    model: str | None = None
    rule: str | None = None
    backend: str | None = None
    #: the pod (host:port) or the external URL that answered
    endpoint: str | None = None
    upstream_model: str | None = None
    status: int = 0
    outcome: str = ""
    stream: bool = False
    classification: str | None = None
    detected: Sequence[str] = ()
    team: str | None = None
    client: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    tried: Sequence[str] = ()
    shadows: Sequence[str] = ()
    budget: str | None = None
    #: how long the request waited for an InferenceService backend's first ready endpoint
    waited_ms: float | None = None
    body: Any = None


def audit_line(record: AuditRecord, now: datetime | None = None, *, include_body: bool = False) -> bytes:
    usage = record.usage
    entry: dict[str, Any] = {
        "ts": (now or datetime.now(UTC)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "msg": "router.request",
        "router": record.router,
        "namespace": record.namespace,
        "request_id": record.request_id,
        "path": record.path,
        "model": record.model,
        "rule": record.rule,
        "backend": record.backend,
        "endpoint": record.endpoint,
        "upstream_model": record.upstream_model,
        "status": record.status,
        "outcome": record.outcome,
        "stream": record.stream,
        "classification": record.classification,
        "detected": sorted(record.detected),
        "team": record.team,
        "client": record.client,
        "prompt_tokens": usage.prompt if usage else None,
        "completion_tokens": usage.completion if usage else None,
        "tokens_estimated": (not usage.reported) if usage else None,
        "cost_usd": round(record.cost_usd, 8) if record.cost_usd is not None else None,
        "latency_ms": round(record.latency_ms, 3) if record.latency_ms is not None else None,
        "ttft_ms": round(record.ttft_ms, 3) if record.ttft_ms is not None else None,
        "tried": list(record.tried),
        "shadows": list(record.shadows),
        "budget": record.budget,
        "waited_ms": round(record.waited_ms, 3) if record.waited_ms is not None else None,
    }
    if include_body:
        entry["body"] = record.body
    return orjson.dumps(entry) + b"\n"
