"""A ModelRouter's status, from what the controller sees: its spec's problems, the router's
Deployment and the InferenceServices it routes to.

* phase: Failed (the spec has errors, or asks for what the admin does not allow: nothing is
  deployed or changed for it, the status names the fields),
  Provisioning (the Deployment has no available replica for this generation yet), Degraded (it
  serves, but an InferenceService backend is missing or not Ready), Ready.
* conditions, as on the other kinds: Ready, Reconciling (True while the Deployment rolls out),
  Stalled (True while the spec is invalid, reason InvalidSpec, or refused, reason PolicyViolation;
  then False/Recovered, never removed), and McpServer
  (False/NotImplemented while `mcpServer` is set: accepted, with no effect yet).
* backends: each one's resolved target (an InferenceService's Service, an external URL) and, for
  InferenceServices, whether it is Ready. Whether an endpoint answers is the router's to know
  (its metrics); the controller does not probe.

`lastUpdated` moves only with a change (`status_changed` ignores it), so a converged router is
never written again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from llmkube.api.meta import Condition
from llmkube.api.modelrouter import BackendStatus, ModelRouter, ModelRouterStatus, RouterPhase
from llmkube.plan.conditions.standard import find_condition, set_condition, update_condition_if_present
from llmkube.plan.inferenceservice.names import service_name
from llmkube.plan.router.config import effective_tier, external_url
from llmkube.plan.router.objects import endpoint_url
from llmkube.plan.router.validation import Issue, errors
from llmkube.plan.router.wake import sleeper_of
from llmkube.plan.tenancy import POLICY_VIOLATION, PolicyIssue

READY, RECONCILING, STALLED, MCP_SERVER = "Ready", "Reconciling", "Stalled", "McpServer"


def _available(deployment: Mapping[str, Any] | None) -> bool:
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    generation = (deployment.get("metadata") or {}).get("generation") or 0
    return int(status.get("availableReplicas") or 0) > 0 and int(
        status.get("observedGeneration") or 0
    ) >= int(generation)


def _isvc_ready(isvc: Mapping[str, Any] | None) -> bool:
    return isvc is not None and (isvc.get("status") or {}).get("phase") == "Ready"


def backend_statuses(
    spec: Mapping[str, Any], namespace: str, isvcs: Mapping[str, Mapping[str, Any] | None]
) -> list[BackendStatus]:
    found = []
    for backend in spec.get("backends") or ():
        name = str(backend.get("name") or "")
        tier = effective_tier(backend)
        external = backend.get("external")
        if isinstance(external, dict):
            found.append(BackendStatus(name=name, tier=tier, address=external_url(external)))
            continue
        isvc_name = str((backend.get("inferenceServiceRef") or {}).get("name") or "")
        isvc = isvcs.get(isvc_name)
        address = f"http://{service_name(isvc_name)}.{namespace}.svc"
        if isvc is None:
            message = f'InferenceService "{isvc_name}" does not exist'
        elif sleeper_of(isvc).asleep:
            # Scaled to zero after an idle period: the router wakes it on the next request.
            found.append(
                BackendStatus(
                    name=name,
                    tier=tier,
                    address=address,
                    healthy=True,
                    message=f'InferenceService "{isvc_name}" is asleep (scaled to zero): a request wakes it',
                )
            )
            continue
        elif not _isvc_ready(isvc):
            message = (
                f'InferenceService "{isvc_name}" is {(isvc.get("status") or {}).get("phase") or "not Ready"}'
            )
        else:
            message = None
        found.append(
            BackendStatus(name=name, tier=tier, address=address, healthy=message is None, message=message)
        )
    return found


def router_status(
    router: ModelRouter,
    spec: Mapping[str, Any],
    issues: list[Issue],
    *,
    deployment: Mapping[str, Any] | None,
    isvcs: Mapping[str, Mapping[str, Any] | None],
    now: datetime,
    violations: Sequence[PolicyIssue] = (),
) -> ModelRouterStatus:
    previous = router.status
    conditions: list[Condition] = list(previous.conditions or ()) if previous else []
    generation = router.metadata.generation
    namespace = router.metadata.namespace or ""
    backends = backend_statuses(spec, namespace, isvcs)

    def put(type_: str, status: bool, reason: str, message: str) -> None:
        nonlocal conditions
        conditions = set_condition(
            conditions,
            type_=type_,
            status="True" if status else "False",
            reason=reason,
            message=message,
            now=now,
            observed_generation=generation,
        )

    problems = errors(issues)
    phase: RouterPhase
    if problems:
        message = "The spec is invalid: " + "; ".join(
            [issue.text() for issue in problems] + [issue.text() for issue in violations]
        )
        phase = "Failed"
        put(READY, False, "InvalidSpec", message)
        put(RECONCILING, False, "InvalidSpec", "Nothing is deployed for an invalid spec.")
        put(STALLED, True, "InvalidSpec", message)
    elif violations:
        message = "The spec asks for what this cluster does not allow: " + "; ".join(
            issue.text() for issue in violations
        )
        phase = "Failed"
        put(READY, False, POLICY_VIOLATION, message)
        put(
            RECONCILING,
            False,
            POLICY_VIOLATION,
            "Nothing is deployed or changed for a refused spec: the router's objects stay as the last "
            "allowed spec made them.",
        )
        put(STALLED, True, POLICY_VIOLATION, message)
    else:
        if find_condition(conditions, STALLED) is not None:
            conditions = update_condition_if_present(
                conditions,
                type_=STALLED,
                status="False",
                reason="Recovered",
                message="The spec is valid.",
                now=now,
                observed_generation=generation,
            )
        unhealthy = [b for b in backends if b.healthy is False]
        if not _available(deployment):
            phase = "Provisioning"
            put(READY, False, "Provisioning", "The router's Deployment has no available replica yet.")
            put(RECONCILING, True, "RollingOut", "The router's Deployment is rolling out.")
        else:
            put(RECONCILING, False, "Converged", "The router's Deployment is up to date.")
            if unhealthy:
                phase = "Degraded"
                put(
                    READY,
                    True,
                    "BackendsNotReady",
                    "The router serves; not ready: " + "; ".join(f"{b.name}: {b.message}" for b in unhealthy),
                )
            else:
                phase = "Ready"
                put(READY, True, "Ready", "The router serves at " + endpoint_url(router) + ".")
    if spec.get("mcpServer") is not None:
        put(MCP_SERVER, False, "NotImplemented", "mcpServer is accepted but has no effect yet.")
    elif find_condition(conditions, MCP_SERVER) is not None:
        conditions = [c for c in conditions if c.type != MCP_SERVER]  # its subject is gone
    return ModelRouterStatus(
        phase=phase,
        endpoint=endpoint_url(router),
        backends=backends,
        active_rules=len(spec.get("rules") or ()),
        last_updated=previous.last_updated if previous and previous.last_updated else now,
        observed_generation=generation,
        conditions=conditions,
    )


def status_changed(old: ModelRouterStatus | None, new: ModelRouterStatus) -> bool:
    """Anything but lastUpdated."""
    if old is None:
        return True
    return old.model_copy(update={"last_updated": None}) != new.model_copy(update={"last_updated": None})


def stamped(old: ModelRouterStatus | None, new: ModelRouterStatus, now: datetime) -> ModelRouterStatus:
    """lastUpdated is the time of the last change."""
    return new.model_copy(update={"last_updated": now}) if status_changed(old, new) else new
