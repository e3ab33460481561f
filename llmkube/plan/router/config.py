"""A ModelRouter's spec, compiled into what the router applies to each request.

The input is the spec as the API server stores it (plain JSON, already checked against the CRD's
schema): the router process reads it from a watch and never imports pydantic, whose import alone
would be a fifth of the router's memory. `compile_config` is total on schema-valid input; what the
schema cannot say (a rule naming an unknown backend, ...) is `validation`'s to report, and the
router refuses a spec with errors (it keeps serving the last good one).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from llmkube.plan.inferenceservice.names import service_name
from llmkube.plan.router.durations import parse_duration
from llmkube.plan.router.glob import Glob

Tier = Literal["local", "cloud"]
Strategy = Literal["primary-fallback", "weighted", "shadow"]
Mode = Literal["header-only", "detector", "hybrid"]

PRIMARY_FALLBACK: Strategy = "primary-fallback"
WEIGHTED: Strategy = "weighted"
SHADOW: Strategy = "shadow"

DEFAULT_QUARANTINE_SECONDS = 15.0
DEFAULT_HEADER_TIMEOUT_SECONDS = 120.0
#: sized with the router pod's memory and the body budget (docs/router.md, "Memory")
DEFAULT_MAX_BODY_BYTES = 16 << 20
DEFAULT_HEALTH_PATH = "/health"
DEFAULT_CLASSIFICATION_HEADER = "x-llmkube-classification"
TASK_COMPLEXITY_HEADER = "x-llmkube-task-complexity"
DEFAULT_TEAM_HEADER = "x-llmkube-team"
DEFAULT_SENSITIVE = frozenset({"pii", "phi"})
DEFAULT_AUDIT_FILE = "/var/log/llmkube-router/audit.log"
DEFAULT_WINDOW_SECONDS = 3600
#: the port name of an InferenceService's Service (plan/inferenceservice/service.py)
SERVICE_PORT_NAME = "http"

#: where a provider is when `url` is empty (litellm has no such place: its url is required)
DEFAULT_URLS: Mapping[str, str] = MappingProxyType(
    {"openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com"}
)
#: the key of the credentials Secret each provider's key is read from (the reference's names)
CREDENTIAL_KEYS: Mapping[str, str] = MappingProxyType(
    {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "litellm": "LITELLM_MASTER_KEY"}
)
SUPPORTED_PROVIDERS = frozenset(CREDENTIAL_KEYS)


@dataclass(frozen=True)
class HealthCheck:
    path: str
    interval: float
    timeout: float


@dataclass(frozen=True)
class Backend:
    name: str
    tier: Tier
    #: the InferenceService, for a local backend; its Service's EndpointSlices are its endpoints
    inference_service: str | None = None
    provider: str | None = None
    #: the external base URL, resolved (provider defaults applied); None for InferenceServices
    url: str | None = None
    model: str | None = None
    credentials_secret: str | None = None
    capabilities: frozenset[str] = frozenset()
    weight: int = 1
    #: USD per token (the spec says per million)
    prompt_usd: float = 0.0
    completion_usd: float = 0.0
    health_check: HealthCheck | None = None
    timeout: float | None = None

    @property
    def external(self) -> bool:
        return self.inference_service is None

    @property
    def service(self) -> str | None:
        """The Service whose EndpointSlices hold this backend's pods."""
        return service_name(self.inference_service) if self.inference_service else None

    @property
    def credential_key(self) -> str | None:
        return CREDENTIAL_KEYS.get(self.provider or "") if self.credentials_secret else None


@dataclass(frozen=True)
class Rule:
    name: str
    backends: tuple[str, ...]
    strategy: Strategy = PRIMARY_FALLBACK
    fail_closed: bool = False
    timeout: float | None = None
    models: tuple[Glob, ...] = ()
    #: (lower-case name, value)
    headers: tuple[tuple[str, str], ...] = ()
    data_classification: frozenset[str] = frozenset()
    task_complexity: str | None = None
    required_capabilities: frozenset[str] = frozenset()
    latency_slo: float | None = None


@dataclass(frozen=True)
class Budget:
    name: str
    scope: Literal["router", "rule", "team"]
    window: float
    max_tokens: int | None = None
    max_usd: float | None = None
    rule_name: str | None = None
    #: lower-case; for scope team
    header_key: str = DEFAULT_TEAM_HEADER


@dataclass(frozen=True)
class ApiKey:
    """What one client key (a key of the apiKeys Secret) may do."""

    name: str
    #: the team its use counts against in team budgets (else its own name)
    team: str | None = None
    #: the rules it may use (empty: every rule and the default route, named "default")
    rules: frozenset[str] = frozenset()
    requests_per_minute: int | None = None

    @property
    def identity(self) -> str:
        return self.team or self.name


@dataclass(frozen=True)
class Classification:
    mode: Mode = "header-only"
    header: str = DEFAULT_CLASSIFICATION_HEADER
    sensitive: frozenset[str] = DEFAULT_SENSITIVE


@dataclass(frozen=True)
class Audit:
    sink: Literal["stdout", "file"] = "stdout"
    path: str = DEFAULT_AUDIT_FILE
    include_body: bool = False


@dataclass(frozen=True)
class RouterConfig:
    name: str
    namespace: str
    backends: Mapping[str, Backend]
    rules: tuple[Rule, ...] = ()
    default_route: str | None = None
    budgets: tuple[Budget, ...] = ()
    classification: Classification = field(default_factory=Classification)
    audit: Audit = field(default_factory=Audit)
    quarantine: float = DEFAULT_QUARANTINE_SECONDS
    header_timeout: float = DEFAULT_HEADER_TIMEOUT_SECONDS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    api_keys_secret: str | None = None
    #: what each client key may do, by the key's name in the Secret (a key not listed: anything)
    api_keys: Mapping[str, ApiKey] = field(default_factory=lambda: MappingProxyType({}))
    generation: int = 0

    def api_key(self, client: str) -> ApiKey:
        return self.api_keys.get(client) or ApiKey(client)

    def backend(self, name: str) -> Backend | None:
        return self.backends.get(name)

    def services(self) -> frozenset[str]:
        """The Services whose EndpointSlices the router watches."""
        return frozenset(b.service for b in self.backends.values() if b.service)


def _duration(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_duration(value)
    except ValueError:
        return None  # validation reports it


def _usd(value: Any) -> float:
    try:
        return float(value) / 1e6 if value else 0.0
    except (TypeError, ValueError):
        return 0.0


def _names(values: Any) -> tuple[str, ...]:
    return tuple(v for v in values or () if isinstance(v, str))


def effective_tier(backend: Mapping[str, Any]) -> Tier:
    """The spec's tier, else local for an InferenceService and cloud for an external backend."""
    tier = backend.get("tier")
    if tier in ("local", "cloud"):
        return "local" if tier == "local" else "cloud"
    return "cloud" if backend.get("external") is not None else "local"


def external_url(external: Mapping[str, Any]) -> str | None:
    url = external.get("url")
    if isinstance(url, str) and url:
        return url.rstrip("/")
    return DEFAULT_URLS.get(str(external.get("provider") or ""))


def _backend(spec: Mapping[str, Any]) -> Backend:
    name = str(spec.get("name") or "")
    ref = spec.get("inferenceServiceRef") or {}
    external = spec.get("external")
    cost = spec.get("costPerMillionTokens") or {}
    check = spec.get("healthCheck")
    health = None
    if isinstance(check, dict):
        health = HealthCheck(
            path=str(check.get("path") or DEFAULT_HEALTH_PATH),
            interval=float(check.get("intervalSeconds") or 10),
            timeout=float(check.get("timeoutSeconds") or 2),
        )
    weight = spec.get("weight")
    common: dict[str, Any] = {
        "name": name,
        "tier": effective_tier(spec),
        "capabilities": frozenset(_names(spec.get("capabilities"))),
        "weight": weight if isinstance(weight, int) and weight >= 0 else 1,
        "prompt_usd": _usd(cost.get("promptUSD")),
        "completion_usd": _usd(cost.get("completionUSD")),
        "health_check": health,
        "timeout": _duration(spec.get("timeout")),
    }
    if isinstance(external, dict):
        secret = (external.get("credentialsSecretRef") or {}).get("name") or None
        return Backend(
            provider=str(external.get("provider") or ""),
            url=external_url(external),
            model=str(external.get("model") or "") or None,
            credentials_secret=secret,
            **common,
        )
    return Backend(inference_service=str(ref.get("name") or ""), **common)


def _rule(spec: Mapping[str, Any]) -> Rule:
    match = spec.get("match") or {}
    route = spec.get("route") or {}
    strategy = route.get("strategy")
    slo = match.get("latencySLOMs")
    return Rule(
        name=str(spec.get("name") or ""),
        backends=_names(route.get("backends")),
        strategy=strategy if strategy in (PRIMARY_FALLBACK, WEIGHTED, SHADOW) else PRIMARY_FALLBACK,
        fail_closed=bool(spec.get("failClosed")),
        timeout=_duration(spec.get("timeout")),
        models=tuple(Glob(pattern) for pattern in _names(match.get("models"))),
        headers=tuple(
            (str(key).lower(), str(value)) for key, value in sorted((match.get("headers") or {}).items())
        ),
        data_classification=frozenset(c.lower() for c in _names(match.get("dataClassification"))),
        task_complexity=match.get("taskComplexity") or None,
        required_capabilities=frozenset(_names(match.get("requiredCapabilities"))),
        latency_slo=slo / 1000.0 if isinstance(slo, int) and slo > 0 else None,
    )


def _budget(spec: Mapping[str, Any]) -> Budget:
    max_usd = spec.get("maxUSD")
    max_tokens = spec.get("maxTokens")
    window = spec.get("windowSeconds")
    scope = spec.get("scope")
    return Budget(
        name=str(spec.get("name") or ""),
        scope="rule" if scope == "rule" else "team" if scope == "team" else "router",
        window=float(window if isinstance(window, int) and window > 0 else DEFAULT_WINDOW_SECONDS),
        max_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
        max_usd=float(max_usd) if isinstance(max_usd, str) and max_usd else None,
        rule_name=spec.get("ruleName") or None,
        header_key=str(spec.get("headerKey") or DEFAULT_TEAM_HEADER).lower(),
    )


def sensitive_classifications(spec: Mapping[str, Any]) -> frozenset[str]:
    classification = (spec.get("policy") or {}).get("classification") or {}
    listed = frozenset(c.lower() for c in _names(classification.get("sensitiveClassifications")))
    return listed or DEFAULT_SENSITIVE


def compile_config(
    spec: Mapping[str, Any], *, name: str, namespace: str, generation: int = 0
) -> RouterConfig:
    policy = spec.get("policy") or {}
    proxy = spec.get("proxy") or {}
    classification = policy.get("classification") or {}
    audit = policy.get("auditLog") or {}
    backends: dict[str, Backend] = {}
    for backend_spec in spec.get("backends") or ():
        backend = _backend(backend_spec)
        backends.setdefault(backend.name, backend)  # a duplicate is validation's to report
    mode = classification.get("mode")
    quarantine = _duration(proxy.get("quarantineDuration"))
    header_timeout = _duration(proxy.get("responseHeaderTimeout"))
    max_body = proxy.get("maxRequestBodyBytes")
    api_keys = policy.get("apiKeys") or {}
    keys = (api_keys.get("secretRef") or {}).get("name") or None
    clients: dict[str, ApiKey] = {}
    for client in api_keys.get("clients") or ():
        rpm = client.get("requestsPerMinute")
        key = ApiKey(
            name=str(client.get("name") or ""),
            team=client.get("team") or None,
            rules=frozenset(_names(client.get("rules"))),
            requests_per_minute=rpm if isinstance(rpm, int) and rpm > 0 else None,
        )
        clients.setdefault(key.name, key)
    return RouterConfig(
        name=name,
        namespace=namespace,
        backends=MappingProxyType(backends),
        rules=tuple(_rule(rule) for rule in spec.get("rules") or ()),
        default_route=spec.get("defaultRoute") or None,
        budgets=tuple(_budget(budget) for budget in policy.get("budgets") or ()),
        classification=Classification(
            mode=mode if mode in ("detector", "hybrid") else "header-only",
            header=str(classification.get("headerKey") or DEFAULT_CLASSIFICATION_HEADER).lower(),
            sensitive=sensitive_classifications(spec),
        ),
        audit=Audit(
            sink="file" if audit.get("sink") == "file" else "stdout",
            path=str(audit.get("filePath") or DEFAULT_AUDIT_FILE),
            include_body=bool(audit.get("includeRequestBody")),
        ),
        quarantine=DEFAULT_QUARANTINE_SECONDS if quarantine is None else quarantine,
        header_timeout=header_timeout or DEFAULT_HEADER_TIMEOUT_SECONDS,
        max_body_bytes=max_body if isinstance(max_body, int) and max_body > 0 else DEFAULT_MAX_BODY_BYTES,
        api_keys_secret=keys,
        api_keys=MappingProxyType(clients),
        generation=generation,
    )
