"""llmkube.plan.router: a ModelRouter's decisions, as pure functions and small state machines with
explicit time. Nothing here does I/O.

For the router process (llmkube.router), one request at a time:

* `admission`: whether a request is let in and where it goes, in three looks (its head, its body,
  the parsed request): the router's own answer, or an `Admission`: the rule, the attempts, the
  budget reservation, what the audit line says of it. It reads the router's state (`View`) and
  writes nothing;
* `outcome`: what became of it once delivery is over: status, tokens, cost, the audit line;
* what those are made of: `config` (the spec compiled, as the router watches it, without pydantic),
  `requests` and `bodies` (the body read and bounded), `detector` (personal data), `matching`,
  `strategy`, `balancer`, `hold` (waiting for a rollout's pod), `timeouts`, `headers`, `providers`,
  `usage`, `errors` (its own answers), `audit`, `wake` (scale to zero: the wake queue and the idle
  clock the routers share); the state machines `budgets`, `ratelimit`,
  `quarantine`, `latency`; `endpoints` (EndpointSlices read) and `egress` (where it may connect).

For the controller (llmkube.controllers.modelrouter): `validation`, `credential_hosts` and
`policy` (what the admin allows), `objects` and `permissions` (the router's Deployment, Service,
ServiceAccount and Role), `status`.

The names other packages use are this package's face (below), each imported when first used: the
router process must not load the controller's half, which reads the API's pydantic types (a fifth
of the router's memory), nor the controller the router's."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.plan.router.admission import (
        NO_FACTS,
        Admission,
        Body,
        Caller,
        Facts,
        Hold,
        Rates,
        Refusal,
        View,
        admit,
        admit_body,
        admit_head,
        plan_attempts,
        reads_body,
    )
    from llmkube.plan.router.audit import AuditRecord, audit_line
    from llmkube.plan.router.balancer import AFFINITY_PREFIX, choose
    from llmkube.plan.router.budgets import NO_RESERVATION, Budgets, Reservation
    from llmkube.plan.router.config import (
        DEFAULT_MAX_BODY_BYTES,
        ApiKey,
        Audit,
        Backend,
        Budget,
        RouterConfig,
        Rule,
        compile_config,
    )
    from llmkube.plan.router.credential_hosts import credential_host_issues
    from llmkube.plan.router.detector import Detection, detect
    from llmkube.plan.router.endpoints import endpoint_names, ready_endpoints, serving_mode
    from llmkube.plan.router.errors import Refused
    from llmkube.plan.router.headers import forwarded, presented_key, request_id, returned
    from llmkube.plan.router.hold import sleeping
    from llmkube.plan.router.latency import RollingP95
    from llmkube.plan.router.matching import Decision, served_models
    from llmkube.plan.router.objects import (
        DEFAULT_IMAGE,
        RouterPlanConfig,
        controlled_by,
        router_name,
        router_objects,
    )
    from llmkube.plan.router.outcome import (
        ANSWERED,
        FAILED,
        GONE,
        RESET,
        UNSERVED,
        Answered,
        Failed,
        Observed,
        Outcome,
        Ticket,
        abandoned,
        nothing_served,
        outcome_of,
        refused,
    )
    from llmkube.plan.router.permissions import ROUTER_PERMISSIONS, role_rules
    from llmkube.plan.router.policy import policy_issues
    from llmkube.plan.router.providers import auth_headers, upstream_url
    from llmkube.plan.router.quarantine import Quarantine
    from llmkube.plan.router.ratelimit import RateLimits
    from llmkube.plan.router.requests import PATHS, Endpoint, ParsedRequest, parse_request, upstream_body
    from llmkube.plan.router.status import router_status, stamped, status_changed
    from llmkube.plan.router.strategy import Attempts
    from llmkube.plan.router.timeouts import header_timeout
    from llmkube.plan.router.usage import StreamUsage, Usage, estimate, usage_of_body
    from llmkube.plan.router.validation import Issue, validate
    from llmkube.plan.router.wake import ActivityClock, Join, Sleeper, WakeQueue, sleeper_of
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "admission": "Admission Body Caller Facts Hold NO_FACTS Rates Refusal View admit "
            "admit_body admit_head plan_attempts reads_body",
            "outcome": "ANSWERED FAILED GONE RESET UNSERVED Answered Failed Observed Outcome "
            "Ticket abandoned nothing_served outcome_of refused",
            "errors": "Refused",
            "headers": "forwarded presented_key request_id returned",
            "config": "DEFAULT_MAX_BODY_BYTES ApiKey Audit Backend Budget RouterConfig Rule compile_config",
            "requests": "PATHS Endpoint ParsedRequest parse_request upstream_body",
            "usage": "StreamUsage Usage estimate usage_of_body",
            "budgets": "NO_RESERVATION Budgets Reservation",
            "ratelimit": "RateLimits",
            "quarantine": "Quarantine",
            "latency": "RollingP95",
            "balancer": "AFFINITY_PREFIX choose",
            "strategy": "Attempts",
            "matching": "Decision served_models",
            "detector": "Detection detect",
            "endpoints": "endpoint_names ready_endpoints serving_mode",
            "providers": "auth_headers upstream_url",
            "timeouts": "header_timeout",
            "hold": "sleeping",
            "audit": "AuditRecord audit_line",
            "validation": "Issue validate",
            "credential_hosts": "credential_host_issues",
            "objects": "DEFAULT_IMAGE RouterPlanConfig controlled_by router_name router_objects",
            "status": "router_status stamped status_changed",
            "policy": "policy_issues",
            "permissions": "ROUTER_PERMISSIONS role_rules",
            "wake": "ActivityClock Join Sleeper WakeQueue sleeper_of",
        },
    )
