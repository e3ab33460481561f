"""The API server's own record of the controller's requests (a LocalCluster started with
`audit=True`): what fault tests count writes with, since a controller killed with SIGKILL takes its
own counters with it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

__all__ = ["MUTATING_VERBS", "AuditEntry", "read_audit", "writes_by_resource"]

MUTATING_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class AuditEntry:
    at: datetime  # when the API server received it
    user: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int

    @property
    def mutating(self) -> bool:
        return self.verb in MUTATING_VERBS


def read_audit(path: Path, *, user: str | None = None, since: datetime | None = None) -> list[AuditEntry]:
    """Every completed request in the audit log (ResponseComplete stage), optionally of one user
    and from a moment on."""
    entries: list[AuditEntry] = []
    if not path.is_file():
        return entries
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        event = orjson.loads(line)
        if event.get("stage") != "ResponseComplete":
            continue
        username = (event.get("user") or {}).get("username", "")
        if user is not None and username != user:
            continue
        at = datetime.fromisoformat(str(event["requestReceivedTimestamp"]).replace("Z", "+00:00"))
        if since is not None and at < since:
            continue
        ref = event.get("objectRef") or {}
        entries.append(
            AuditEntry(
                at=at,
                user=username,
                verb=str(event.get("verb", "")),
                group=str(ref.get("apiGroup", "")),
                resource=str(ref.get("resource", "")),
                subresource=str(ref.get("subresource", "")),
                namespace=str(ref.get("namespace", "")),
                name=str(ref.get("name", "")),
                code=int((event.get("responseStatus") or {}).get("code", 0)),
            )
        )
    return entries


def writes_by_resource(entries: list[AuditEntry]) -> Counter[str]:
    """Mutating requests counted by `verb resource[/subresource]`."""
    return Counter(
        f"{e.verb} {e.resource}{'/' + e.subresource if e.subresource else ''}" for e in entries if e.mutating
    )
