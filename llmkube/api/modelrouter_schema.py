"""The ModelRouter CRD's schema, written here from the reference's v0.8.7 types (field for field, so
its manifests apply unchanged) with llmkube's additions; a test keeps it in step with the pydantic
types in `llmkube.api.modelrouter`.

Descriptions say what each field does in llmkube (docs/router.md has the long form)."""

from typing import Any

from llmkube.api.modelrouter import DURATION_PATTERN, NAME_PATTERN, USD_PATTERN
from llmkube.api.schema_convert import Schema

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
    r"|(\.[0-9]+))))?$"
)


def _s(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def _i(description: str, fmt: str = "int32", **extra: Any) -> Schema:
    return {"type": "integer", "format": fmt, "description": description, **extra}


def _b(description: str) -> Schema:
    return {"type": "boolean", "description": description}


def _o(description: str, properties: Schema, required: list[str] | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "description": description, "properties": properties, **extra}
    if required:
        schema["required"] = required
    return schema


def _list(description: str, items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "description": description, "items": items, **extra}


def _strings(description: str) -> Schema:
    return _list(description, {"type": "string"})


def _reference(description: str) -> Schema:
    """corev1.LocalObjectReference, as controller-gen renders it."""
    reference = _o(
        description, {"name": _s("Name of the object, in the ModelRouter's namespace.", default="")}
    )
    reference["x-kubernetes-map-type"] = "atomic"
    return reference


def _duration(description: str) -> Schema:
    return _s(description + ' A duration such as "30s", "2m" or "500ms".', pattern=DURATION_PATTERN)


def _quantities(description: str) -> Schema:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        },
    }


def _backend() -> Schema:
    external = _o(
        "A provider outside the cluster, or any OpenAI-compatible server reached by URL.",
        {
            "provider": _s(
                "anthropic, openai or litellm: which authentication header the router sends. bedrock and "
                "vertex_ai are refused (put a LiteLLM proxy in front of them).",
                enum=["anthropic", "openai", "bedrock", "vertex_ai", "litellm"],
            ),
            "url": _s(
                "Base URL (https://api.openai.com for openai and https://api.anthropic.com for anthropic "
                "when empty; required for litellm). A trailing /v1 is not repeated."
            ),
            "model": _s("The provider's model: the request's `model` is rewritten to it."),
            "credentialsSecretRef": _reference(
                "Secret holding the key, mounted into the router as a file: ANTHROPIC_API_KEY, "
                "OPENAI_API_KEY or LITELLM_MASTER_KEY by provider. The key goes only to the provider's "
                "own host over https, or to a host the admin allows (--router-external-hosts)."
            ),
        },
        required=["model", "provider"],
    )
    cost = _o(
        "USD per million tokens: the cost of each request in audit lines, metrics and maxUSD budgets.",
        {
            "promptUSD": _s("USD per million prompt tokens.", pattern=USD_PATTERN),
            "completionUSD": _s("USD per million completion tokens.", pattern=USD_PATTERN),
        },
    )
    health = _o(
        "Active health probes of this backend (of each of its ready endpoints for an InferenceService); "
        "without it, readiness comes from the EndpointSlices and failed requests (quarantine).",
        {
            "path": _s("HTTP path probed with GET; default /health."),
            "intervalSeconds": _i("Seconds between probes.", minimum=1, default=10),
            "timeoutSeconds": _i("Seconds a probe may take.", minimum=1, default=2),
        },
    )
    return _o(
        "One destination: exactly one of inferenceServiceRef and external.",
        {
            "name": _s("Name used by rules, metrics and audit lines.", pattern=NAME_PATTERN),
            "inferenceServiceRef": _reference(
                "An InferenceService of this namespace: requests go straight to its ready pods."
            ),
            "external": external,
            "tier": _s(
                "local or cloud. Sensitive classifications may only reach local backends. Default: local "
                "for an InferenceService, cloud for an external backend.",
                enum=["local", "cloud"],
            ),
            "capabilities": _strings("What the backend can do (tools, vision, ...): rules may require some."),
            "weight": _i("Share of traffic under the weighted strategy (default 1; 0: never).", minimum=0),
            "costPerMillionTokens": cost,
            "healthCheck": health,
            "timeout": _duration("How long to wait for this backend's response headers."),
        },
        required=["name"],
    )


def _rule() -> Schema:
    match = _o(
        "Conditions that must all hold (an absent field holds for every request).",
        {
            "dataClassification": _strings("Classifications that match (the request's, see policy)."),
            "taskComplexity": _s(
                "The x-llmkube-task-complexity header's value.", enum=["simple", "moderate", "complex"]
            ),
            "requiredCapabilities": _strings(
                "Only backends with every one of these are candidates; with none, the rule does not match."
            ),
            "latencySLOMs": _i(
                "primary-fallback: while the primary's rolling p95 time to first byte is above this, the "
                "next backend within it goes first.",
                minimum=1,
            ),
            "headers": {
                "type": "object",
                "description": "Request headers that must have these values (names case-insensitive).",
                "additionalProperties": {"type": "string"},
            },
            "models": _strings('Globs matched against the request\'s `model` (e.g. "qwen3-*").'),
        },
    )
    route = _o(
        "Where a matching request goes.",
        {
            "backends": _list("Backend names, in order.", {"type": "string"}, minItems=1),
            "strategy": _s(
                "primary-fallback (default): in order, the next on connect errors, 5xx and header "
                "timeouts; weighted: one by weight, the others as fallbacks; shadow: the first answers, "
                "the others get copies whose answers are discarded.",
                enum=["primary-fallback", "weighted", "shadow"],
                default="primary-fallback",
            ),
        },
        required=["backends"],
    )
    return _o(
        "A rule: the first whose match holds routes the request.",
        {
            "name": _s("Name used in metrics and audit lines.", pattern=NAME_PATTERN),
            "match": match,
            "route": route,
            "failClosed": _b(
                "When no backend of the route can serve, answer 503 instead of trying other rules or the "
                "defaultRoute. Required on rules matching sensitive classifications."
            ),
            "timeout": _duration("How long to wait for response headers on this rule's requests."),
        },
        required=["name", "route"],
    )


def _policy() -> Schema:
    budget = _o(
        "A cap on tokens and/or USD over a rolling window; over it, requests are answered 429.",
        {
            "name": _s("Name used in metrics and audit lines.", pattern=NAME_PATTERN),
            "scope": _s(
                "router: all requests; rule: those of ruleName; team: per value of the headerKey header.",
                enum=["router", "rule", "team"],
            ),
            "ruleName": _s("The rule, for scope rule."),
            "headerKey": _s("The header naming the team, for scope team (default x-llmkube-team)."),
            "windowSeconds": _i("Length of the rolling window.", minimum=1, default=3600),
            "maxTokens": _i("Prompt plus completion tokens allowed in the window.", "int64", minimum=1),
            "maxUSD": _s("USD allowed in the window (from costPerMillionTokens).", pattern=USD_PATTERN),
        },
        required=["name", "scope"],
    )
    classification = _o(
        "How a request's data classification is found.",
        {
            "mode": _s(
                "header-only (default): the header; detector: the bundled detector (pii when it finds "
                "e-mail addresses, phone or payment card numbers, national IDs); hybrid: the header, else "
                "the detector.",
                enum=["header-only", "detector", "hybrid"],
                default="header-only",
            ),
            "headerKey": _s("The header (default x-llmkube-classification)."),
            "sensitiveClassifications": _strings(
                "Classifications that may only go to local backends, on failClosed rules (default pii, phi)."
            ),
        },
    )
    audit = _o(
        "One JSON line per request: router, rule, backend, model, status, tokens, cost, latency, TTFT.",
        {
            "sink": _s(
                "stdout (default) or file; otlp is refused (collect the container log instead).",
                enum=["stdout", "file", "otlp"],
                default="stdout",
            ),
            "filePath": _s("The file, for sink file (default /var/log/llmkube-router/audit.log)."),
            "includeRequestBody": _b("Also write each request's body."),
        },
    )
    api_keys = _o(
        "llmkube: clients must send one of the keys in this Secret (Authorization: Bearer, or x-api-key); "
        "each key of the Secret names a client, its value is the key.",
        {
            "secretRef": _reference("The Secret, mounted into the router as files."),
            "clients": _list(
                "llmkube: what each key may do. With keys on, team-scoped budgets count each key's use "
                "against its team (else its name), never a header's; a key not listed may use every rule.",
                _o(
                    "One key of the Secret.",
                    {
                        "name": _s("The key's name in the Secret (the client).", minLength=1, maxLength=253),
                        "team": _s(
                            "The team its use counts against in team-scoped budgets (default: its name).",
                            minLength=1,
                            maxLength=253,
                        ),
                        "rules": _strings(
                            "The rules it may use, by name (`default`: the defaultRoute); absent or empty: "
                            "all. Any other is answered 403."
                        ),
                        "requestsPerMinute": _i(
                            "Its rate: a minute's worth at once, then this many a minute (429 with "
                            "Retry-After beyond).",
                            minimum=1,
                            maximum=1_000_000,
                        ),
                    },
                    required=["name"],
                ),
                **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
            ),
        },
        required=["secretRef"],
    )
    return _o(
        "Budgets, classification, audit and client keys.",
        {
            "budgets": _list("Caps over rolling windows (counted per router replica).", budget),
            "classification": classification,
            "auditLog": audit,
            "apiKeys": api_keys,
        },
    )


def _proxy() -> Schema:
    resources = _o(
        "Requests and limits of the router container (default: 100m CPU, 128Mi memory, a 512Mi limit: "
        "docs/router.md, Memory).",
        {
            "claims": _list(
                "Resource claims of the pod the container uses.",
                _o(
                    "A resource claim.",
                    {"name": _s("The claim's name."), "request": _s("A request of the claim.")},
                    required=["name"],
                ),
                **{"x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map"},
            ),
            "limits": _quantities("Limits, e.g. memory: 256Mi."),
            "requests": _quantities("Requests, e.g. cpu: 100m."),
        },
    )
    return _o(
        "The router's Deployment.",
        {
            "replicas": _i("Router pods (budgets and health are counted per pod).", minimum=1, maximum=10),
            "image": _s(
                "The image (default: the controller's own, which has `llmkube router`); another must be "
                "one the admin allows (--router-allowed-images)."
            ),
            "resources": resources,
            "imagePullSecrets": _list("Pull secrets of the router's pods.", _reference("A pull secret.")),
            "quarantineDuration": _duration(
                "How long an endpoint is skipped after a connect error, a 5xx or a timeout before one "
                "request probes it again (default 15s)."
            ),
            "responseHeaderTimeout": _duration(
                "The longest wait for response headers (default 120s); rule and backend timeouts may "
                "only shorten it."
            ),
            "maxRequestBodyBytes": _i(
                "llmkube: larger request bodies are answered 413 (default 16 MiB; docs/router.md, Memory).",
                "int64",
                minimum=1024,
                maximum=1 << 30,
            ),
        },
    )


def _status(conditions: Schema) -> Schema:
    backend = _o(
        "A backend as the controller resolved it.",
        {
            "name": _s("The backend's name."),
            "tier": _s("local or cloud."),
            "address": _s("Where it is reached: the Service of an InferenceService, or the external URL."),
            "healthy": _b("Whether it can serve: a Ready InferenceService, or an external URL."),
            "message": _s("Why not, or how many replicas are ready."),
            "lastProbeTime": _s("When this was last judged.", format="date-time"),
        },
        required=["name"],
    )
    budget = _o(
        "Reserved: budget counters live in each router pod (its /metrics).",
        {
            "name": _s("The budget's name."),
            "tokensUsed": _i("Tokens in the window.", "int64"),
            "usdUsed": _s("USD in the window."),
            "utilization": _s("Fraction of the budget used."),
        },
        required=["name"],
    )
    return _o(
        "Observed state of the ModelRouter.",
        {
            "phase": _s(
                "Pending, Provisioning, Ready, Degraded (some backend cannot serve) or Failed.",
                enum=["Pending", "Provisioning", "Ready", "Degraded", "Failed"],
            ),
            "endpoint": _s("The URL clients send requests to."),
            "backends": _list("Each backend, resolved.", backend),
            "activeRules": _i("Rules in force."),
            "budgetUtilization": _list("Reserved (see the router's /metrics).", budget),
            "lastUpdated": _s("When the status last changed.", format="date-time"),
            "observedGeneration": _i("The metadata.generation this status describes.", "int64"),
            "conditions": conditions,
        },
    )


def modelrouter_schema(conditions: Schema) -> Schema:
    spec = _o(
        "Backends, the rules that choose between them, and the router that applies them.",
        {
            "backends": _list("Where requests can go.", _backend(), minItems=1),
            "rules": _list("Rules, tried in order.", _rule()),
            "defaultRoute": _s("The backend for requests no rule matches (none: 503)."),
            "policy": _policy(),
            "endpoint": _o(
                "The router's Service.",
                {
                    "port": _i("The Service's port.", minimum=1, maximum=65535, default=8080),
                    "path": _s("Path shown in status.endpoint.", default="/v1/chat/completions"),
                    "type": _s(
                        "ClusterIP, NodePort or LoadBalancer (as the admin allows).",
                        enum=["ClusterIP", "NodePort", "LoadBalancer"],
                        default="ClusterIP",
                    ),
                },
            ),
            "proxy": _proxy(),
            "mcpServer": _o(
                "Reserved: accepted, without effect (a condition says so).",
                {"enabled": _b("Reserved.")},
            ),
        },
        required=["backends"],
    )
    return {
        "type": "object",
        "description": "ModelRouter is one OpenAI-compatible endpoint that routes requests across "
        "InferenceServices and external providers by rules.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": _status(conditions),
        },
        "required": ["spec"],
    }
