"""ModelRouter specs the CRD schema accepts but that cannot work, each with the field the user is told
about and the start of what they are told.

Used by the pure validation tests (tests/unit/router/test_router_validation.py), by the admission
policy on a real API server (tests/integration/test_modelrouter_admission.py: refused at apply,
naming the same field), and by the controller's status on the full tier."""

from dataclasses import dataclass, field
from typing import Any, Literal


def local(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inferenceServiceRef": {"name": name}, **extra}


def cloud(name: str, provider: str = "openai", **external: Any) -> dict[str, Any]:
    return {"name": name, "external": {"provider": provider, "model": "m", **external}}


def routed(*backends: str, **extra: Any) -> dict[str, Any]:
    return {"route": {"backends": list(backends)}, **extra}


@dataclass(frozen=True)
class BadRouter:
    case: str
    spec: dict[str, Any]
    field: str
    message: str
    severity: Literal["error", "warning"] = "error"
    name: str = "bad-router"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def admission(self) -> bool:
        """Refused by manifests/admission/modelrouter_policy.yaml too (the others are reported in
        the ModelRouter's status only)."""
        return self.case in POLICY_CASES

    @property
    def text(self) -> str:
        return f"{self.field}: {self.message}"


def _spec(*backends: dict[str, Any], **rest: Any) -> dict[str, Any]:
    return {"backends": list(backends) or [local("a")], **rest}


#: the mistakes CEL says at `kubectl apply`: the routing's integrity and the sensitive-data gate
POLICY_CASES = frozenset(
    {
        "both-kinds",
        "neither-kind",
        "unknown-default",
        "unknown-rule-backend",
        "sensitive-not-fail-closed",
        "sensitive-to-cloud",
        "sensitive-to-unlabelled-external",
        "own-sensitive-list",
    }
)

CORPUS: list[BadRouter] = [
    BadRouter(
        "both-kinds",
        _spec(
            {
                "name": "a",
                "inferenceServiceRef": {"name": "a"},
                "external": {"provider": "openai", "model": "m"},
            }
        ),
        "spec.backends[0]",
        "exactly one of inferenceServiceRef and external, not both",
    ),
    BadRouter(
        "neither-kind",
        _spec(local("a"), {"name": "b"}),
        "spec.backends[1]",
        "exactly one of inferenceServiceRef and external is required",
    ),
    BadRouter(
        "empty-isvc-name",
        _spec({"name": "a", "inferenceServiceRef": {}}),
        "spec.backends[0].inferenceServiceRef.name",
        "the InferenceService's name is required",
    ),
    BadRouter(
        "isvc-called-cloud",
        _spec(local("a", tier="cloud")),
        "spec.backends[0].tier",
        "an InferenceService is local",
    ),
    BadRouter(
        "bedrock",
        _spec(local("a"), cloud("b", "bedrock")),
        "spec.backends[1].external.provider",
        "bedrock is not served by this router",
    ),
    BadRouter(
        "litellm-without-url",
        _spec(cloud("a", "litellm")),
        "spec.backends[0].external.url",
        "required for provider litellm",
    ),
    BadRouter(
        "url-not-http",
        _spec(cloud("a", url="ftp://models.example.com")),
        "spec.backends[0].external.url",
        '"ftp://models.example.com" is not an http(s) URL with a host',
    ),
    BadRouter(
        "url-with-credentials",
        _spec(cloud("a", url="https://user:pw@api.example.com")),
        "spec.backends[0].external.url",
        '"https://user:pw@api.example.com" may not carry a query, a fragment or credentials',
    ),
    BadRouter(
        "empty-credentials-name",
        _spec(cloud("a", credentialsSecretRef={})),
        "spec.backends[0].external.credentialsSecretRef.name",
        "the Secret's name is required",
    ),
    BadRouter(
        "probe-path",
        _spec(local("a", healthCheck={"path": "health"})),
        "spec.backends[0].healthCheck.path",
        '"health" must start with /',
    ),
    BadRouter(
        "backend-timeout-short",
        _spec(local("a", timeout="50ms")),
        "spec.backends[0].timeout",
        '"50ms" is shorter than 0.1s',
    ),
    BadRouter(
        "backend-timeout-long",
        _spec(local("a", timeout="2h")),
        "spec.backends[0].timeout",
        '"2h" is longer than 30m',
    ),
    BadRouter(
        "duplicate-backend",
        _spec(local("a"), local("a")),
        "spec.backends[1].name",
        'duplicate backend name "a"',
    ),
    BadRouter(
        "unknown-default",
        _spec(local("a"), defaultRoute="b"),
        "spec.defaultRoute",
        'no backend is named "b"',
    ),
    BadRouter(
        "unknown-rule-backend",
        _spec(local("a"), rules=[{"name": "r", **routed("a", "ghost")}]),
        "spec.rules[0].route.backends[1]",
        'no backend is named "ghost"',
    ),
    BadRouter(
        "duplicate-rule",
        _spec(local("a"), rules=[{"name": "r", **routed("a")}, {"name": "r", **routed("a")}]),
        "spec.rules[1].name",
        'duplicate rule name "r"',
    ),
    BadRouter(
        "sensitive-not-fail-closed",
        _spec(local("a"), rules=[{"name": "pii", "match": {"dataClassification": ["pii"]}, **routed("a")}]),
        "spec.rules[0].failClosed",
        "the rule matches sensitive classifications (pii): set true",
    ),
    BadRouter(
        "sensitive-to-cloud",
        _spec(
            local("a"),
            {**cloud("c"), "tier": "cloud"},
            rules=[
                {
                    "name": "pii",
                    "match": {"dataClassification": ["phi"]},
                    "failClosed": True,
                    **routed("a", "c"),
                }
            ],
        ),
        "spec.rules[0].route.backends[1]",
        '"c" is a cloud backend, and the rule matches sensitive classifications (phi)',
    ),
    BadRouter(
        "sensitive-to-unlabelled-external",
        _spec(
            cloud("c"),
            rules=[
                {"name": "pii", "match": {"dataClassification": ["pii"]}, "failClosed": True, **routed("c")}
            ],
        ),
        "spec.rules[0].route.backends[0]",
        '"c" is a cloud backend',
    ),
    BadRouter(
        "own-sensitive-list",
        _spec(
            local("a"),
            rules=[{"name": "s", "match": {"dataClassification": ["secret"]}, **routed("a")}],
            policy={"classification": {"sensitiveClassifications": ["secret"]}},
        ),
        "spec.rules[0].failClosed",
        "the rule matches sensitive classifications (secret)",
    ),
    BadRouter(
        "header-name",
        _spec(local("a"), rules=[{"name": "r", "match": {"headers": {"x team": "blue"}}, **routed("a")}]),
        "spec.rules[0].match.headers",
        '"x team" is not a header name',
    ),
    BadRouter(
        "weights-all-zero",
        _spec(
            local("a", weight=0),
            local("b", weight=0),
            rules=[{"name": "w", "route": {"backends": ["a", "b"], "strategy": "weighted"}}],
        ),
        "spec.rules[0].route.backends",
        "every backend has weight 0",
    ),
    BadRouter(
        "rule-timeout-short",
        _spec(local("a"), rules=[{"name": "r", "timeout": "1ms", **routed("a")}]),
        "spec.rules[0].timeout",
        '"1ms" is shorter than 0.1s',
    ),
    BadRouter(
        "rule-budget-without-rule",
        _spec(local("a"), policy={"budgets": [{"name": "b", "scope": "rule", "maxTokens": 10}]}),
        "spec.policy.budgets[0].ruleName",
        "required for scope rule",
    ),
    BadRouter(
        "rule-budget-unknown-rule",
        _spec(
            local("a"), policy={"budgets": [{"name": "b", "scope": "rule", "ruleName": "x", "maxTokens": 10}]}
        ),
        "spec.policy.budgets[0].ruleName",
        'no rule is named "x"',
    ),
    BadRouter(
        "budget-without-cap",
        _spec(local("a"), policy={"budgets": [{"name": "b", "scope": "router"}]}),
        "spec.policy.budgets[0]",
        "set maxTokens, maxUSD or both",
    ),
    BadRouter(
        "duplicate-budget",
        _spec(
            local("a"),
            policy={
                "budgets": [
                    {"name": "b", "scope": "router", "maxTokens": 1},
                    {"name": "b", "scope": "router", "maxUSD": "1"},
                ]
            },
        ),
        "spec.policy.budgets[1].name",
        'duplicate budget name "b"',
    ),
    BadRouter(
        "team-header-name",
        _spec(
            local("a"),
            policy={"budgets": [{"name": "b", "scope": "team", "headerKey": "x:y", "maxTokens": 1}]},
        ),
        "spec.policy.budgets[0].headerKey",
        '"x:y" is not a header name',
    ),
    BadRouter(
        "classification-header-name",
        _spec(local("a"), policy={"classification": {"headerKey": "bad header"}}),
        "spec.policy.classification.headerKey",
        '"bad header" is not a header name',
    ),
    BadRouter(
        "otlp",
        _spec(local("a"), policy={"auditLog": {"sink": "otlp"}}),
        "spec.policy.auditLog.sink",
        "otlp is not supported",
    ),
    BadRouter(
        "audit-path-relative",
        _spec(local("a"), policy={"auditLog": {"sink": "file", "filePath": "audit.log"}}),
        "spec.policy.auditLog.filePath",
        '"audit.log" must be an absolute file path',
    ),
    BadRouter(
        "api-keys-without-name",
        _spec(local("a"), policy={"apiKeys": {"secretRef": {}}}),
        "spec.policy.apiKeys.secretRef.name",
        "the Secret's name is required",
    ),
    BadRouter(
        "header-timeout-short",
        _spec(local("a"), proxy={"responseHeaderTimeout": "10ms"}),
        "spec.proxy.responseHeaderTimeout",
        '"10ms" is shorter than 0.1s',
    ),
    BadRouter(
        "quarantine-long",
        _spec(local("a"), proxy={"quarantineDuration": "2h"}),
        "spec.proxy.quarantineDuration",
        '"2h" is longer than 60m',
    ),
    BadRouter(
        "name-too-long",
        _spec(local("a")),
        "metadata.name",
        f'"{"r" * 51}" is 51 characters; at most 50',
        name="r" * 51,
    ),
    BadRouter(
        "capabilities-nobody-has",
        _spec(
            local("a", capabilities=["code"]),
            rules=[{"name": "v", "match": {"requiredCapabilities": ["vision"]}, **routed("a")}],
        ),
        "spec.rules[0].match.requiredCapabilities",
        "no backend of the route has all of vision: it never matches",
        severity="warning",
    ),
]

ERRORS = [bad for bad in CORPUS if bad.severity == "error"]
