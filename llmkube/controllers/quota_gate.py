"""The GPU quotas' half of the GPU queue, in the InferenceService controller: which quotas cover a
service, what the others under them hold, the decision (plan/quota/decision.py), and the ledger of
what this leader admitted (plan/quota/ledger.py).

Only the leader reconciles, and every decision is taken and recorded between two awaits (asyncio
runs one worker at a time between them): two workers planning two services of one team at once
cannot both take the last GPU. What the others hold is, per service, the larger of what the ledger
admitted and what the cache shows its Deployment (or HPA) was given: a write not yet observed is
counted, and so is a release not yet observed (a service scaled down frees its GPUs when its
Deployment shows it). A service's own replicas are kept whatever a quota became (never evicted).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import structlog
from pydantic import ValidationError

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.kube.cache import BY_NAMESPACE, Change, Store
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.inferenceservice.memory_fit import node_gpu_memory
from llmkube.plan.inferenceservice.priority import PRIORITY_CLASSES
from llmkube.plan.inferenceservice.queue import QueueEntry, queue_order_key
from llmkube.plan.inferenceservice.quota_cost import held_replicas, replica_cost, wanted_replicas
from llmkube.plan.quota.decision import (
    BELOW_QUOTA_PRIORITY,
    Grant,
    QuotaLimits,
    QuotaView,
    ReplicaCost,
    Request,
    Usage,
    decide,
)
from llmkube.plan.quota.ledger import Claim, Identity, QuotaLedger
from llmkube.plan.quota.scope import covers
from llmkube.plan.quota.validation import quota_issues

log = structlog.get_logger("llmkube.controllers.quota_gate")

_PRIORITY_VALUES = {pc.priority: pc.value for pc in PRIORITY_CLASSES}


def quota_key(quota: Obj) -> str:
    meta = quota.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def limits_of(quota: Obj, priority_values: dict[str, int]) -> QuotaLimits:
    meta, spec = quota.get("metadata") or {}, quota.get("spec") or {}
    minimum = str(spec.get("minPriority") or "")
    return QuotaLimits(
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        gpu_count=int(spec.get("gpuCount") or 0),
        vram_bytes=int(spec.get("vramBytes") or 0),
        min_priority=minimum,
        # The value of the llmkube class of that name, as the cluster has it (else as documented).
        min_priority_value=priority_values.get(f"llmkube-{minimum}", _PRIORITY_VALUES.get(minimum))
        if minimum
        else None,
    )


def _size(obj: Obj | None) -> int:
    """A Deployment's replicas or an HPA's maxReplicas (the other is absent from either)."""
    return max(held_replicas(obj, None), held_replicas(None, obj))


@dataclass(frozen=True)
class Holding:
    identity: Identity
    replicas: int
    cost: ReplicaCost


class QuotaGate:
    def __init__(
        self,
        *,
        quotas: Store,
        services: Store,
        models: Store,
        deployments: Store,
        hpas: Store,
        nodes: Store,
        namespaces: Store,
        gpu_resource: Callable[[Model], str],
    ) -> None:
        self.quotas, self.services, self.models = quotas, services, models
        self.deployments, self.hpas, self.nodes, self.namespaces = deployments, hpas, nodes, namespaces
        self._gpu_resource = gpu_resource
        self.ledger = QuotaLedger()
        #: called with the quotas whose holders or waiters changed (the GPUQuota controller's keys)
        self.on_quota_changed: Callable[[Iterable[str]], None] = lambda keys: None

    # -- scope ------------------------------------------------------------------------------------

    def _labels(self, namespace: str) -> dict[str, str] | None:
        obj = self.namespaces.get_object(None, namespace)
        if obj is None:
            return None
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return {str(k): str(v) for k, v in labels.items()}

    def covering(self, namespace: str) -> list[Obj]:
        """The valid quotas covering a namespace."""
        labels = self._labels(namespace)
        return [
            quota
            for quota in self.quotas.objects()
            if not quota_issues(quota.get("spec") or {})
            and covers(quota.get("spec") or {}, namespace, labels)
        ]

    def covered_namespaces(self, quota: Obj) -> list[str]:
        spec = quota.get("spec") or {}
        if spec.get("namespaceRef"):
            return [str(spec["namespaceRef"])]
        names = [str((ns.get("metadata") or {}).get("name") or "") for ns in self.namespaces.objects()]
        return [name for name in names if covers(spec, name, self._labels(name))]

    def covered_services(self, quota: Obj) -> list[ObjectKey]:
        return [
            ObjectKey.parse(key)
            for namespace in self.covered_namespaces(quota)
            for key in self.services.keys_by_index(BY_NAMESPACE, namespace)
        ]

    # -- what is held ------------------------------------------------------------------------------

    def _model(self, namespace: str, name: str) -> Model | None:
        raw = self.models.get_object(namespace, name)
        try:
            return Model.model_validate(raw) if raw is not None else None
        except ValidationError:
            return None

    def cost_of(self, isvc: InferenceService, model: Model) -> ReplicaCost:
        memory = node_gpu_memory(self.nodes.objects(), self._gpu_resource(model))
        return replica_cost(isvc.spec, model, memory)

    def observed_held(self, identity: Identity) -> int:
        namespace, name = identity
        return held_replicas(
            self.deployments.get_object(namespace, name), self.hpas.get_object(namespace, name)
        )

    def holding(self, quota: Obj, exclude: Identity | None = None) -> list[Holding]:
        """What each service the quota covers holds (the ledger's admissions not yet observed too)."""
        found: list[Holding] = []
        for key in self.covered_services(quota):
            identity = (key.namespace, key.name)
            if identity == exclude:
                continue
            observed = self.observed_held(identity)
            claim = self.ledger.get(identity)
            if claim is not None:
                found.append(Holding(identity, max(claim.granted, observed), claim.cost))
                continue
            if observed <= 0:
                continue
            cost = self._cost_from_cache(key)
            if cost is not None:
                found.append(Holding(identity, observed, cost))
        return found

    def _cost_from_cache(self, key: ObjectKey) -> ReplicaCost | None:
        raw = self.services.get_object(key.namespace, key.name)
        if raw is None:
            return None
        try:
            isvc = InferenceService.model_validate(raw)
        except ValidationError:
            return None
        model = self._model(key.namespace, isvc.spec.model_ref)
        if model is None:
            # Its Model is gone, its pods may still run: count the service's own GPU count.
            gpus = isvc.spec.resources.gpu if isvc.spec.resources and isvc.spec.resources.gpu else 0
            return ReplicaCost(gpus, None)
        return self.cost_of(isvc, model)

    # -- the decision ------------------------------------------------------------------------------

    def decide(
        self, isvc: InferenceService, model: Model, priority: int | None, priority_classes: dict[str, int]
    ) -> tuple[Grant | None, Claim | None]:
        """The grant for a service, and the claim to record once its plan is made (None, None: no
        valid quota covers it). Synchronous: nothing may run between this and `record`."""
        namespace, name = isvc.metadata.namespace or "", isvc.metadata.name or ""
        identity = (namespace, name)
        covering = self.covering(namespace)
        if not covering:
            return None, None
        cost = self.cost_of(isvc, model)
        entry = QueueEntry(namespace, name, priority or 0, isvc.metadata.creation_timestamp)
        order = queue_order_key(entry)
        claim = self.ledger.get(identity)
        held = max(claim.granted if claim is not None else 0, self.observed_held(identity))
        views = []
        for quota in covering:
            key = quota_key(quota)
            others = Usage()
            for holding in self.holding(quota, exclude=identity):
                others = others.plus(holding.cost, holding.replicas)
            views.append(
                QuotaView(limits_of(quota, priority_classes), others, self.ledger.ahead(key, order, identity))
            )
        request = Request(
            cost=cost,
            wanted=wanted_replicas(isvc.spec),
            held=held,
            priority=priority,
            priority_name=isvc.spec.priority or "",
        )
        grant = decide(request, views)
        new = Claim(
            quotas=frozenset(quota_key(q) for q in covering),
            cost=cost,
            granted=grant.replicas,
            order=order,
            waiting_on=grant.quota if grant.waiting else "",
            blocked_by=grant.quota,
            reason=grant.reason,
            message=grant.message,
        )
        return grant, new

    def record(self, identity: Identity, claim: Claim | None, *, applied: bool) -> set[str]:
        """Keep what the plan did: the claim when its objects are applied; else (the plan changes
        nothing: a refused or invalid spec, its Model missing) what it holds now, waiting on nothing.
        Returns the quotas whose waiters may now get in."""
        old = self.ledger.get(identity)
        if claim is None:
            if old is None:
                return set()
            wake = self.ledger.forget(identity)
            self.on_quota_changed(old.quotas)
            return wake
        if not applied:
            held = max(old.granted if old is not None else 0, self.observed_held(identity))
            claim = replace(claim, granted=held, waiting_on="")
            if claim.reason != BELOW_QUOTA_PRIORITY:  # refused for another reason than a quota's
                claim = replace(claim, blocked_by="", reason="", message="")
        wake = self.ledger.record(identity, claim)
        if old != claim:
            self.on_quota_changed(claim.quotas | (old.quotas if old is not None else frozenset()))
        return wake

    def forget(self, identity: Identity) -> set[str]:
        old = self.ledger.get(identity)
        wake = self.ledger.forget(identity)
        if old is not None:
            self.on_quota_changed(old.quotas)
        return wake

    def blocked(self, quota: str) -> list[tuple[Identity, Claim]]:
        """The services a quota holds back or refuses, in queue order."""
        found = [
            (claim.order, identity, claim)
            for identity, claim in self.ledger.items()
            if claim.blocked_by == quota
        ]
        return [(identity, claim) for _, identity, claim in sorted(found, key=lambda item: item[0])]

    def waiters(self, quotas: Iterable[str], skip: Identity | None = None) -> list[ObjectKey]:
        return [
            ObjectKey(*identity)
            for quota in sorted(set(quotas))
            for identity in self.ledger.waiters(quota)
            if identity != skip
        ]

    # -- event -> keys ------------------------------------------------------------------------------

    def follow_quota(self, change: Change) -> list[ObjectKey]:
        """A quota created, changed (raised, lowered, a minPriority) or deleted: its waiters and the
        services it covers (now or before) are decided again; its status is written again."""
        keys: list[ObjectKey] = []
        for quota in (change.old_obj, change.new):
            if quota is None:
                continue
            if not quota_issues(quota.get("spec") or {}):
                keys += self.covered_services(quota)
            keys += self.waiters([quota_key(quota)])
        self.on_quota_changed([quota_key(change.obj)])
        return list(dict.fromkeys(keys))

    def follow_workload(self, change: Change) -> list[ObjectKey]:
        """A Deployment or HPA of a service holding quota shrank or went away: the waiters on its
        quotas may now get in (the cache now shows the release)."""
        old, new = change.old_obj, change.new
        meta = change.obj.get("metadata") or {}
        identity = (meta.get("namespace") or "", meta.get("name") or "")
        claim = self.ledger.get(identity)
        if claim is None or not claim.quotas:
            return []
        if new is not None and _size(new) >= _size(old):
            return []
        self.on_quota_changed(claim.quotas)
        return self.waiters(claim.quotas, skip=identity)

    def follow_service(self, change: Change) -> list[ObjectKey]:
        """A service deleted: what it held under its quotas is free (its objects go with it)."""
        if change.type != "DELETED":
            return []
        meta = change.obj.get("metadata") or {}
        identity = (meta.get("namespace") or "", meta.get("name") or "")
        return self.waiters(self.forget(identity), skip=identity)
