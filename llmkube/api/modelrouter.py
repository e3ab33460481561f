"""ModelRouter (`mr`): one OpenAI-compatible endpoint in front of InferenceServices and external
providers, dispatching each request by declarative rules.

Field for field the reference operator's v0.8.7 `ModelRouter`, so its manifests apply unchanged;
the additions of ours are marked. Two deliberate differences in the schema (docs/router.md):
`tier` has no schema default (an external backend without one is `cloud`, not `local`: a default
of `local` would let an unlabelled cloud backend through the fail-closed gate), and durations carry
a pattern (a malformed one is refused at apply instead of at the router's start).

The router process reads the spec as the API server stores it (plain JSON: `plan/router/config.py`)
and never imports these types; the controller and the tests do.
"""

from datetime import datetime
from typing import Literal

from pydantic import Field

from llmkube.api.base import ApiModel, KubeObject
from llmkube.api.constants import API_VERSION, ROUTER_KIND
from llmkube.api.meta import Condition, ObjectMeta

#: a Go duration as metav1.Duration spells it ("15s", "1m30s", "250ms"), unsigned
DURATION_PATTERN = r"^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
#: backend, rule and budget names: used in metrics labels and audit lines
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
USD_PATTERN = r"^[0-9]+(\.[0-9]+)?$"

Tier = Literal["local", "cloud"]
Provider = Literal["anthropic", "openai", "bedrock", "vertex_ai", "litellm"]
TaskComplexity = Literal["simple", "moderate", "complex"]
Strategy = Literal["primary-fallback", "weighted", "shadow"]
BudgetScope = Literal["router", "rule", "team"]
ClassificationMode = Literal["header-only", "detector", "hybrid"]
AuditSink = Literal["stdout", "file", "otlp"]
RouterServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
RouterPhase = Literal["Pending", "Provisioning", "Ready", "Degraded", "Failed"]


class LocalObjectReference(ApiModel):
    name: str | None = ""


class ExternalProvider(ApiModel):
    provider: Provider
    url: str | None = None
    model: str
    credentials_secret_ref: LocalObjectReference | None = None


class TokenCost(ApiModel):
    prompt_usd: str | None = Field(default=None, alias="promptUSD", pattern=USD_PATTERN)
    completion_usd: str | None = Field(default=None, alias="completionUSD", pattern=USD_PATTERN)


class BackendHealthCheck(ApiModel):
    path: str | None = None
    interval_seconds: int | None = Field(default=10, ge=1)
    timeout_seconds: int | None = Field(default=2, ge=1)


class RouterBackend(ApiModel):
    name: str = Field(pattern=NAME_PATTERN)
    inference_service_ref: LocalObjectReference | None = None
    external: ExternalProvider | None = None
    tier: Tier | None = None
    capabilities: list[str] | None = None
    weight: int | None = Field(default=None, ge=0)
    cost_per_million_tokens: TokenCost | None = None
    health_check: BackendHealthCheck | None = None
    timeout: str | None = Field(default=None, pattern=DURATION_PATTERN)


class RuleMatch(ApiModel):
    data_classification: list[str] | None = None
    task_complexity: TaskComplexity | None = None
    required_capabilities: list[str] | None = None
    latency_slo_ms: int | None = Field(default=None, ge=1, alias="latencySLOMs")
    headers: dict[str, str] | None = None
    models: list[str] | None = None


class RuleRoute(ApiModel):
    backends: list[str] = Field(min_length=1)
    strategy: Strategy | None = "primary-fallback"


class RouterRule(ApiModel):
    name: str = Field(pattern=NAME_PATTERN)
    match: RuleMatch | None = None
    route: RuleRoute
    fail_closed: bool | None = None
    timeout: str | None = Field(default=None, pattern=DURATION_PATTERN)


class BudgetSpec(ApiModel):
    name: str = Field(pattern=NAME_PATTERN)
    scope: BudgetScope
    rule_name: str | None = None
    header_key: str | None = None
    window_seconds: int | None = Field(default=3600, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_usd: str | None = Field(default=None, alias="maxUSD", pattern=USD_PATTERN)


class ClassificationPolicy(ApiModel):
    mode: ClassificationMode | None = "header-only"
    header_key: str | None = None
    sensitive_classifications: list[str] | None = None


class AuditLogPolicy(ApiModel):
    sink: AuditSink | None = "stdout"
    file_path: str | None = None
    include_request_body: bool | None = None


class ApiKeyClient(ApiModel):
    """llmkube's addition: what the key named `name` in the Secret may do."""

    name: str = Field(min_length=1, max_length=253)
    #: the team its use counts against in team-scoped budgets (else its name): the reference's
    #: name for a verified team (`auth.allowlists[].team`)
    team: str | None = Field(default=None, min_length=1, max_length=253)
    #: the rules (by name, `default` for the defaultRoute) it may use; empty or absent: all
    rules: list[str] | None = None
    requests_per_minute: int | None = Field(default=None, ge=1, le=1_000_000)


class ApiKeysPolicy(ApiModel):
    """llmkube's addition: clients must present one of the keys in this Secret."""

    secret_ref: LocalObjectReference
    #: what each key may do: its team, its rules, its rate (a key not listed may do anything, and
    #: counts as the team of its own name)
    clients: list[ApiKeyClient] | None = None


class RouterPolicy(ApiModel):
    budgets: list[BudgetSpec] | None = None
    classification: ClassificationPolicy | None = None
    audit_log: AuditLogPolicy | None = None
    #: llmkube's addition
    api_keys: ApiKeysPolicy | None = None


class RouterEndpointSpec(ApiModel):
    port: int | None = Field(default=8080, ge=1, le=65535)
    path: str | None = "/v1/chat/completions"
    type: RouterServiceType | None = "ClusterIP"


class RouterProxySpec(ApiModel):
    replicas: int | None = Field(default=None, ge=1, le=10)
    image: str | None = None
    resources: KubeObject | None = None
    image_pull_secrets: list[LocalObjectReference] | None = None
    quarantine_duration: str | None = Field(default=None, pattern=DURATION_PATTERN)
    response_header_timeout: str | None = Field(default=None, pattern=DURATION_PATTERN)
    #: llmkube's addition: larger request bodies are answered 413
    max_request_body_bytes: int | None = Field(default=None, ge=1024, le=1 << 30)


class MCPServerSpec(ApiModel):
    enabled: bool | None = None


class ModelRouterSpec(ApiModel):
    backends: list[RouterBackend] = Field(min_length=1)
    rules: list[RouterRule] | None = None
    default_route: str | None = None
    policy: RouterPolicy | None = None
    endpoint: RouterEndpointSpec | None = None
    proxy: RouterProxySpec | None = None
    mcp_server: MCPServerSpec | None = None


class BackendStatus(ApiModel):
    name: str
    tier: str | None = None
    address: str | None = None
    healthy: bool | None = None
    message: str | None = None
    last_probe_time: datetime | None = None


class BudgetStatus(ApiModel):
    name: str
    tokens_used: int | None = None
    usd_used: str | None = Field(default=None, alias="usdUsed")
    utilization: str | None = None


class ModelRouterStatus(ApiModel):
    phase: RouterPhase | None = None
    endpoint: str | None = None
    backends: list[BackendStatus] | None = None
    active_rules: int | None = None
    budget_utilization: list[BudgetStatus] | None = None
    last_updated: datetime | None = None
    #: llmkube's addition (the kstatus convention, as on the other kinds)
    observed_generation: int | None = None
    conditions: list[Condition] | None = None


class ModelRouter(ApiModel):
    api_version: str | None = API_VERSION
    kind: str | None = ROUTER_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ModelRouterSpec
    status: ModelRouterStatus | None = None
