"""Server-side apply that writes only when it would change something.

``Applier.apply(resource, desired, observed, policy=...)`` compares ``desired`` with the fields our
manager owns on ``observed`` (the cached object) and sends nothing when they agree; otherwise it
applies with ``force=true``. The kind's ``FieldPolicy`` (field_policy.py, data from the caller) adds
what a plain apply cannot do, each step only when the managed fields show it is needed:

1. take over fields (the Update entries of a predecessor, strays in an exclusive subtree): the
   object is read whole, then one JSON patch of ``metadata.managedFields`` guarded by its
   resourceVersion, so the apply then removes what we do not set;
2. hand over fields we stop setting (an apply of just those fields by a private manager, without
   force), so dropping them does not reset them to their defaults;
3. the apply; a rejection whose every cause is a field the policy recreates for (a Deployment's
   selector) is answered by deleting the object (guarded by its uid) and applying again. Any other
   rejection is raised.

Before all that, an object whose cached copy is older than our own last apply of the same body is
left alone: our write has not reached the cache yet (recent_applies.py).

The result says which of these happened.
"""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from llmkube.kube.apply.compare import clean_intent, needs_apply
from llmkube.kube.apply.field_policy import NO_POLICY, FieldPath, FieldPolicy
from llmkube.kube.apply.field_transfer import fields_to_hand_over, takeover_entries, takeover_may_be_needed
from llmkube.kube.apply.recent_applies import RecentApplies, body_digest
from llmkube.kube.errors import Conflict, Invalid, NotFound
from llmkube.kube.managed_fields import owned_fields
from llmkube.kube.resource import Resource
from llmkube.kube.rest import DEFAULT_FIELD_MANAGER, JSON_PATCH, ApiClient
from llmkube.kube.types import Obj

__all__ = ["Applier", "ApplyOutcome", "ApplyResult"]

log = structlog.get_logger("llmkube.kube.apply.applier")


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
        self.recent = RecentApplies()

    def forget(self, resource: Resource, name: str, namespace: str | None) -> None:
        """The object is gone (deleted by us): nothing of our last apply of it holds."""
        self.recent.forget((str(resource), namespace or "", name))

    @property
    def handover_manager(self) -> str:
        """The private manager that holds a field between us and its next owner."""
        return f"{self.field_manager}-handover"

    async def apply(
        self,
        resource: Resource,
        desired: Obj,
        observed: Obj | None = None,
        *,
        policy: FieldPolicy = NO_POLICY,
        initial: Obj | None = None,
    ) -> ApplyResult:
        """Make the fields we own on the object equal to ``desired``.

        ``observed`` is the object as last seen (None when it does not exist: we apply, and the
        server creates it). ``initial`` holds fields set only when the object is created (server-side
        apply has no create-only fields: they are added to the creating apply, and later handed over
        or dropped like any field we stop setting)."""
        body = clean_intent(desired)
        body.setdefault("apiVersion", resource.api_version)
        body.setdefault("kind", resource.kind)
        if observed is None and initial:
            body = _merged(body, clean_intent(initial))
        key = _memory_key(resource, body)
        digest = body_digest(body)
        if observed is not None and self.recent.already_applied(key, digest, _version(observed)):
            return ApplyResult(ApplyOutcome.UNCHANGED, observed)  # ours is on its way to the cache
        if observed is None and (created := self.recent.created(key, digest)) is not None:
            return ApplyResult(ApplyOutcome.UNCHANGED, created)  # our create is on its way to the cache
        based_on = [_version(observed)]
        prelude: list[str] = []
        if observed is not None:
            observed = await self._take_over(resource, body, observed, policy, prelude)
            observed = await self._hand_over(resource, body, observed, policy, prelude)
            based_on.append(_version(observed))
        reasons = needs_apply(body, observed, self.field_manager)
        if not reasons:
            assert observed is not None
            outcome = ApplyOutcome.UPDATED if prelude else ApplyOutcome.UNCHANGED
            return ApplyResult(outcome, observed, prelude)
        try:
            stored, status = await self.client.apply(resource, body, field_manager=self.field_manager)
        except Invalid as error:
            # Without a cached copy (it exists, yet our cache has not seen it) there is no uid to
            # guard the delete with: fail, and let the retry find it in the cache.
            if not policy.answers_by_recreate(error) or observed is None:
                raise
            stored = await self._recreate(resource, body, observed, error)
            self.recent.record(key, digest, based_on, _version(stored))
            return ApplyResult(ApplyOutcome.RECREATED, stored, prelude + reasons)
        self.recent.record(key, digest, based_on, _version(stored))
        if observed is None:
            self.recent.record_create(key, digest, stored)
        outcome = ApplyOutcome.CREATED if status == 201 else ApplyOutcome.UPDATED
        log.debug("applied", resource=str(resource), key=_key(body), outcome=outcome.value, reasons=reasons)
        return ApplyResult(outcome, stored, prelude + reasons)

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

    async def _take_over(
        self, resource: Resource, body: Obj, observed: Obj, policy: FieldPolicy, done: list[str]
    ) -> Obj:
        """Make the fields the policy takes over part of our Apply entry: one JSON patch of the
        managedFields, computed from the whole object (a cached copy keeps only our entries) and
        guarded by its resourceVersion (a changed object answers 409, and the reconcile retries)."""
        if not takeover_may_be_needed(observed, body, policy):
            return observed
        meta = body["metadata"]
        current = await self.client.get(resource, meta["name"], meta.get("namespace"))
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        entries = takeover_entries(current, body, self.field_manager, policy, now)
        if entries is None:
            return current
        version = current["metadata"]["resourceVersion"]
        patch = [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": version},
            {"op": "replace", "path": "/metadata/managedFields", "value": entries},
        ]
        merged = sorted(
            {
                f"{e.get('manager')}/{e.get('operation')}"
                for e in current["metadata"].get("managedFields") or ()
            }
            - {f"{e.get('manager')}/{e.get('operation')}" for e in entries}
        )
        stored = await self.client.patch(
            resource,
            meta["name"],
            patch,
            meta.get("namespace"),
            patch_type=JSON_PATCH,
            field_manager=self.field_manager,
        )
        log.info("took over managed fields", resource=str(resource), key=_key(body), merged_entries=merged)
        done.append("<took over managed fields>")
        return stored

    async def _hand_over(
        self, resource: Resource, body: Obj, observed: Obj, policy: FieldPolicy, done: list[str]
    ) -> Obj:
        """Fields we stop setting keep their value: a private manager applies them first (without
        force: a conflict means the new owner holds them already, with another value)."""
        for attempt in range(2):
            fields = fields_to_hand_over(observed, body, owned_fields(observed, self.field_manager), policy)
            if not fields:
                return observed
            try:
                stored, _ = await self.client.apply(
                    resource, _handover_body(body, fields), field_manager=self.handover_manager, force=False
                )
            except Conflict:
                if attempt:
                    raise
                # Our copy is older than the object: look again (the new owner may hold them now).
                meta = body["metadata"]
                observed = await self.client.get(resource, meta["name"], meta.get("namespace"))
                continue
            log.info(
                "fields handed over",
                resource=str(resource),
                key=_key(body),
                fields=[".".join(path) for path, _ in fields],
                manager=self.handover_manager,
            )
            done.extend(f"<handed over .{'.'.join(path)}>" for path, _ in fields)
            return stored
        return observed

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


def _handover_body(body: Obj, fields: list[tuple[FieldPath, object]]) -> Obj:
    meta = body["metadata"]
    handover: Obj = {
        "apiVersion": body["apiVersion"],
        "kind": body["kind"],
        "metadata": {key: meta[key] for key in ("name", "namespace") if key in meta},
    }
    for path, value in fields:
        node = handover
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = value
    return handover


def _merged(base: Obj, extra: Obj) -> Obj:
    result = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merged(result[key], value)
        else:
            result[key] = value
    return result


def _version(obj: Obj | None) -> str | None:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


def _memory_key(resource: Resource, body: Obj) -> tuple[str, str, str]:
    meta = body.get("metadata") or {}
    return (str(resource), meta.get("namespace") or "", meta.get("name") or "")


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
