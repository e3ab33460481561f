"""The ModelRouter controller: a router's ServiceAccount, Role, RoleBinding, Service and Deployment
(plan/router/objects.py), and its status (plan/router/status.py).

Level-triggered like the others: every object is read from a cache, applied with server-side
apply only when the fields we own differ (a converged router costs no write, nor does a restart),
never taken over from someone else (an object of that name we do not control is reported, not
overwritten). An invalid spec is reported in status, naming the fields, and in an Event; the
objects already deployed are left as they are (the router keeps serving the last good spec, as
the router process itself does). So is a spec that asks for what the admin does not allow
(plan/router/policy.py: reason PolicyViolation): nothing is created or changed for it."""

from __future__ import annotations

from datetime import UTC, datetime

import structlog
from pydantic import ValidationError

from llmkube.api.modelrouter import ModelRouter, ModelRouterStatus
from llmkube.controllers.apply_policies import POLICIES_BY_KIND
from llmkube.controllers.cache_transforms import deployment_cache, service_cache
from llmkube.controllers.host import ControllerHost
from llmkube.controllers.resources import (
    DEPLOYMENTS,
    INFERENCE_SERVICES,
    MANAGED_SELECTOR,
    MODEL_ROUTERS,
    NAMESPACE_CACHE_TRANSFORM,
    NAMESPACES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
)
from llmkube.kube.apply import NO_POLICY, NotOurs, refuse_foreign
from llmkube.kube.cache import BY_NAMESPACE, Informer, keep_owned
from llmkube.kube.control import (
    Controller,
    Result,
    StatusWriter,
    TerminalError,
    Watch,
    any_of,
    enqueue_mapped,
    enqueue_object,
    enqueue_owner,
    generation_changed,
    labels_changed,
)
from llmkube.kube.resource import Resource
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.router.objects import (
    RouterPlanConfig,
    backend_services,
    controlled_by,
    router_name,
    router_objects,
)
from llmkube.plan.router.policy import policy_issues
from llmkube.plan.router.status import router_status, stamped, status_changed
from llmkube.plan.router.validation import Issue, errors, validate
from llmkube.plan.tenancy import POLICY_VIOLATION, namespace_policy

log = structlog.get_logger("llmkube.controllers.modelrouter")

CONTROLLER = "modelrouter"
#: in the order plan/router/objects.py makes them: the pod's identity and rights before the pod
_KINDS: tuple[Resource, ...] = (SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS, SERVICES, DEPLOYMENTS)


def encode_status(status: ModelRouterStatus) -> Obj:
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")


def _backends_reference(router: Obj, isvc: str) -> bool:
    for backend in (router.get("spec") or {}).get("backends") or ():
        if ((backend or {}).get("inferenceServiceRef") or {}).get("name") == isvc:
            return True
    return False


class ModelRouterController:
    def __init__(self, host: ControllerHost, config: RouterPlanConfig) -> None:
        self.host = host
        self.config = config
        manager = host.applier.field_manager
        self.routers = host.informer(MODEL_ROUTERS)
        self.status_writer = StatusWriter(
            host.applier, MODEL_ROUTERS, differs=status_changed, encode=encode_status
        )
        self.status_writer.follow(self.routers)
        # Shared with the InferenceService controller (the same scope, selector and trimming).
        self.isvcs = host.informer(INFERENCE_SERVICES, compact=True)
        self.deployments = host.informer(
            DEPLOYMENTS, label_selector=MANAGED_SELECTOR, transform=deployment_cache(manager), compact=True
        )
        self.services = host.informer(
            SERVICES, label_selector=MANAGED_SELECTOR, transform=service_cache(manager), compact=True
        )
        # What each namespace allows (its Pod Security level): shared with the InferenceService
        # controller (the same transform).
        self.namespaces = host.informer(NAMESPACES, transform=NAMESPACE_CACHE_TRANSFORM)
        self.caches: dict[str, Informer] = {
            DEPLOYMENTS.kind: self.deployments,
            SERVICES.kind: self.services,
        }
        for resource in (SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS):
            self.caches[resource.kind] = host.informer(
                resource, label_selector=MANAGED_SELECTOR, transform=keep_owned(manager)
            )
        self.controller: Controller = host.add_controller(
            CONTROLLER,
            self.reconcile,
            watches=[
                Watch(MODEL_ROUTERS, enqueue_object, predicates=[any_of(generation_changed, labels_changed)]),
                *(
                    Watch(resource, enqueue_owner(MODEL_ROUTERS), label_selector=MANAGED_SELECTOR)
                    for resource in _KINDS
                ),
                # A backend's readiness is in the router's status.
                Watch(INFERENCE_SERVICES, enqueue_mapped(self._routers_of_isvc)),
                # The cache keeps only the policy labels: any label change is a policy change.
                Watch(NAMESPACES, enqueue_mapped(self._routers_of_namespace), predicates=[labels_changed]),
            ],
        )

    def _routers_of_isvc(self, isvc: Obj) -> list[ObjectKey]:
        meta = isvc.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        return [
            ObjectKey.of(router)
            for router in self.routers.store.by_index(BY_NAMESPACE, namespace)
            if _backends_reference(router, name)
        ]

    def _routers_of_namespace(self, namespace: Obj) -> list[ObjectKey]:
        name = (namespace.get("metadata") or {}).get("name") or ""
        return [ObjectKey.of(router) for router in self.routers.store.by_index(BY_NAMESPACE, name)]

    async def reconcile(self, key: ObjectKey) -> Result | None:
        raw = self.routers.store.get_object(key.namespace, key.name)
        if raw is None:
            self.status_writer.forget(key)
            return None  # its objects are owned by it: the garbage collector removes them
        try:
            router = ModelRouter.model_validate(raw)
        except ValidationError as error:
            raise TerminalError(f"ModelRouter {key} does not match the API types: {error}") from error
        router = router.model_copy(update={"status": self.status_writer.current(raw, router.status)})
        spec = raw.get("spec") or {}
        issues = validate(spec, key.name)
        for issue in issues:
            if issue.severity == "warning":
                log.info(
                    "spec warning",
                    namespace=key.namespace,
                    name=key.name,
                    field=issue.field,
                    problem=issue.message,
                )
        objects = router_objects(router, self.config)
        violations = policy_issues(
            router,
            spec,
            self.config,
            namespace_policy(self.namespaces.store.get_object(None, key.namespace)),
            built=objects[-1],
        )
        for violation in violations:
            log.warning(
                "spec refused",
                namespace=key.namespace,
                name=key.name,
                reason=POLICY_VIOLATION,
                field=violation.field,
                problem=violation.message,
            )
        if not errors(issues) and not violations:
            try:
                await self._converge(objects, router)
            except NotOurs as foreign:
                issues = [*issues, Issue("metadata.name", str(foreign))]
        problems = errors(issues)
        now = datetime.now(UTC)
        # The backends' services alone, by name: a namespace of many services is not parsed whole.
        isvcs = {name: self.isvcs.store.get_object(key.namespace, name) for name in backend_services(router)}
        status = router_status(
            router,
            spec,
            issues,
            deployment=self.deployments.store.get_object(key.namespace, router_name(key.name)),
            isvcs=isvcs,
            now=now,
            violations=violations,
        )
        old = router.status
        status = stamped(old, status, now)
        refused = problems or violations
        if refused and (old is None or old.phase != "Failed" or status_changed(old, status)):
            message = "; ".join([issue.text() for issue in problems] + [v.text() for v in violations])
            reason = "InvalidSpec" if problems else POLICY_VIOLATION
            self.host.recorder.event(raw, "Warning", reason, message)
        written = await self.status_writer.write(raw, old, status)
        if written is not None:
            log.info(
                "status written",
                namespace=key.namespace,
                name=key.name,
                phase=status.phase,
                previous=old.phase if old else None,
            )
            if status.phase != (old.phase if old else None) and status.phase in ("Ready", "Degraded"):
                self.host.recorder.event(
                    raw, "Normal", status.phase, f"The router serves at {status.endpoint}."
                )
        return None

    async def _converge(self, objects: list[Obj], router: ModelRouter) -> None:
        for resource, desired in zip(_KINDS, objects, strict=True):
            meta = desired["metadata"]
            current = self.caches[resource.kind].store.get_object(meta["namespace"], meta["name"])
            if current is None:
                # The caches hold only objects with our label: one of that name made by someone
                # else is invisible to them. Never take it over.
                current = await refuse_foreign(
                    self.host.client,
                    resource,
                    desired,
                    lambda existing: controlled_by(existing, router),
                    owner="ModelRouter",
                )
            result = await self.host.applier.apply(
                resource, desired, current, policy=POLICIES_BY_KIND.get(resource.kind, NO_POLICY)
            )
            if result.changed:
                log.info(
                    f"{resource.kind} {result.outcome.value}",
                    namespace=meta["namespace"],
                    name=meta["name"],
                    fields=result.reasons[:5],
                )
