"""Server-side apply that writes only when it would change something.

``Applier.apply(resource, desired, observed)`` compares ``desired`` with the fields our manager owns
on ``observed`` (the cached object) and sends nothing when they agree; otherwise it applies with
``force=true``.  A rejection because an immutable field changed (a Deployment's selector, a
PriorityClass's value) is answered by deleting the object (guarded by its uid) and applying again.
The result says which of these happened.
"""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass, field

import structlog

from llmkube.kube.client import DEFAULT_FIELD_MANAGER, ApiClient
from llmkube.kube.compare import clean_intent, needs_apply
from llmkube.kube.errors import Invalid, NotFound
from llmkube.kube.resource import Resource
from llmkube.kube.types import Obj

__all__ = ["Applier", "ApplyOutcome", "ApplyResult"]

log = structlog.get_logger("llmkube.kube.apply")


class ApplyOutcome(enum.Enum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    RECREATED = "recreated"


@dataclass(frozen=True)
class ApplyResult:
    outcome: ApplyOutcome
    object: Obj
    #: why a write was made (paths that differed); empty when unchanged
    reasons: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.outcome is not ApplyOutcome.UNCHANGED


class Applier:
    def __init__(self, client: ApiClient, field_manager: str = DEFAULT_FIELD_MANAGER) -> None:
        self.client = client
        self.field_manager = field_manager

    async def apply(
        self,
        resource: Resource,
        desired: Obj,
        observed: Obj | None = None,
        *,
        recreate_on_immutable: bool = True,
    ) -> ApplyResult:
        """Make the fields we own on the object equal to ``desired``.

        ``observed`` is the cached object (None when the cache has none: we apply, and the server
        creates it).  Pass ``recreate_on_immutable=False`` to get the 422 instead of a recreate."""
        body = clean_intent(desired)
        body.setdefault("apiVersion", resource.api_version)
        body.setdefault("kind", resource.kind)
        reasons = needs_apply(body, observed, self.field_manager)
        if not reasons:
            assert observed is not None
            return ApplyResult(ApplyOutcome.UNCHANGED, observed)
        try:
            stored, status = await self.client.apply(resource, body, field_manager=self.field_manager)
        except Invalid as error:
            # Without a cached copy (it exists, yet our cache has not seen it) there is no uid to
            # guard the delete with: fail, and let the retry find it in the cache.
            if not (recreate_on_immutable and error.mentions_immutable_field()) or observed is None:
                raise
            stored = await self._recreate(resource, body, observed, error)
            return ApplyResult(ApplyOutcome.RECREATED, stored, reasons)
        outcome = ApplyOutcome.CREATED if status == 201 else ApplyOutcome.UPDATED
        log.debug("applied", resource=str(resource), key=_key(body), outcome=outcome.value, reasons=reasons)
        return ApplyResult(outcome, stored, reasons)

    async def apply_status(self, resource: Resource, desired: Obj, observed: Obj | None) -> ApplyResult:
        """Apply ``desired["status"]`` through the status subresource, only when it differs from the
        status fields we own.  (Compare timestamps yourself: a changed timestamp is a change.)"""
        meta = desired.get("metadata") or {}
        body: Obj = {
            "apiVersion": desired.get("apiVersion", resource.api_version),
            "kind": desired.get("kind", resource.kind),
            "metadata": {key: meta[key] for key in ("name", "namespace") if key in meta},
            "status": clean_intent({"status": desired.get("status") or {}}, keep_status=True).get(
                "status", {}
            ),
        }
        if observed is None:
            raise NotFound(404, f"{resource.kind} {_key(body)} is not in the cache: no status to write")
        reasons = needs_apply(body, observed, self.field_manager, subresource="status")
        if not reasons:
            return ApplyResult(ApplyOutcome.UNCHANGED, observed)
        stored, _ = await self.client.apply(
            resource, body, field_manager=self.field_manager, subresource="status"
        )
        return ApplyResult(ApplyOutcome.UPDATED, stored, reasons)

    async def _recreate(self, resource: Resource, body: Obj, observed: Obj, error: Invalid) -> Obj:
        meta = body["metadata"]
        uid = (observed.get("metadata") or {}).get("uid")
        log.info(
            "immutable field changed: deleting and recreating",
            resource=str(resource),
            key=_key(body),
            fields=[cause.field for cause in error.causes],
        )
        with contextlib.suppress(NotFound):  # already gone: just create it
            await self.client.delete(
                resource, meta["name"], meta.get("namespace"), uid=uid, propagation_policy="Background"
            )
        stored, _ = await self.client.apply(resource, body, field_manager=self.field_manager)
        return stored


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
