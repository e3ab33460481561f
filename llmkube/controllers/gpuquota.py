"""The GPUQuota controller: each quota's status (plan/quota/status.py) from what the GPU queue holds
under it (controllers/quota_gate.py): the GPUs and bytes its services hold, who holds them, who waits
on it in queue order, whether its spec is valid. Status only: the InferenceService controller
enforces the quota, and wakes this one (by key) whenever a holding or a wait changes."""

from collections.abc import Iterable
from datetime import UTC, datetime

import structlog
from pydantic import ValidationError

from llmkube.api.gpuquota import GPUQuota, GPUQuotaStatus, QuotaHolder, QuotaWaiter
from llmkube.controllers.host import ControllerHost
from llmkube.controllers.quota_gate import QuotaGate, quota_key
from llmkube.controllers.resources import GPU_QUOTAS, NAMESPACES
from llmkube.kube.control import (
    Controller,
    Result,
    StatusWriter,
    TerminalError,
    Watch,
    enqueue_mapped,
    enqueue_object,
    generation_changed,
    labels_changed,
)
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.quota.status import quota_status, status_changed
from llmkube.plan.quota.validation import quota_issues

log = structlog.get_logger("llmkube.controllers.gpuquota")

CONTROLLER = "gpuquota"


def encode_status(status: GPUQuotaStatus) -> Obj:
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")


class GPUQuotaController:
    def __init__(self, host: ControllerHost, gate: QuotaGate) -> None:
        self.host = host
        self.gate = gate
        # The InferenceService controller's cache of quotas (the same scope: one informer, shared).
        self.quotas = host.informer(GPU_QUOTAS)
        self.status_writer = StatusWriter(
            host.applier, GPU_QUOTAS, differs=status_changed, encode=encode_status
        )
        self.status_writer.follow(self.quotas)
        self.controller: Controller = host.add_controller(
            CONTROLLER,
            self.reconcile,
            watches=[
                Watch(GPU_QUOTAS, enqueue_object, predicates=[generation_changed]),
                # A namespace's labels decide which selector quotas cover it.
                Watch(NAMESPACES, enqueue_mapped(self._all_quotas), predicates=[labels_changed]),
            ],
        )
        gate.on_quota_changed = self.changed

    def changed(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.controller.enqueue(ObjectKey.parse(key))

    def _all_quotas(self, _: Obj) -> list[ObjectKey]:
        return [
            ObjectKey.of(quota)
            for quota in self.quotas.store.objects()
            if (quota.get("spec") or {}).get("selector")
        ]

    async def reconcile(self, key: ObjectKey) -> Result | None:
        raw = self.quotas.store.get_object(key.namespace, key.name)
        if raw is None:
            self.status_writer.forget(key)
            return None
        try:
            quota = GPUQuota.model_validate(raw)
        except ValidationError as error:
            raise TerminalError(f"GPUQuota {key} does not match the API types: {error}") from error
        old = self.status_writer.current(raw, quota.status)
        issues = quota_issues(raw.get("spec") or {})
        holders: list[QuotaHolder] = []
        waiters: list[QuotaWaiter] = []
        if not issues:
            for holding in sorted(self.gate.holding(raw), key=lambda h: h.identity):
                if holding.replicas <= 0 or holding.cost.gpus <= 0:
                    continue
                vram = holding.cost.vram_bytes
                holders.append(
                    QuotaHolder(
                        namespace=holding.identity[0],
                        name=holding.identity[1],
                        replicas=holding.replicas,
                        gpus=holding.cost.gpus * holding.replicas,
                        vram_bytes=vram * holding.replicas if vram is not None else None,
                    )
                )
            for identity, claim in self.gate.blocked(quota_key(raw)):
                waiters.append(
                    QuotaWaiter(
                        namespace=identity[0],
                        name=identity[1],
                        needs_gpus=claim.cost.gpus,
                        needs_vram_bytes=claim.cost.vram_bytes,
                        reason=claim.reason,
                        message=claim.message or None,
                    )
                )
        status = quota_status(
            old,
            generation=quota.metadata.generation,
            issues=issues,
            holders=holders,
            waiters=waiters,
            gpu_count=quota.spec.gpu_count,
            now=datetime.now(UTC),
        )
        if await self.status_writer.write(raw, old, status) is not None:
            log.info(
                "status written",
                namespace=key.namespace,
                name=key.name,
                used=status.used_gpu_count,
                waiting=status.waiting,
            )
        return None
