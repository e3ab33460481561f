"""A ModelRouter spec compiled into what the router applies: defaults, effective tiers, provider
URLs, durations, costs; glob and duration syntax."""

from typing import Any

import pytest
from router_factories import config, external, local, rule

from llmkube.plan.router.config import DEFAULT_SENSITIVE, compile_config
from llmkube.plan.router.durations import format_duration, parse_duration
from llmkube.plan.router.glob import Glob


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("250ms", 0.25),
        ("2h", 7200.0),
        ("1.5s", 1.5),
        ("100us", 1e-4),
        ("100µs", 1e-4),
        ("3ns", 3e-9),
        (".5s", 0.5),
        ("1h1m1s", 3661.0),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "-1s", "1d", "s", "1 s", "1.5.5s"])
def test_durations_go_refuses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.25, "250ms"), (15, "15s"), (120, "2m0s"), (90.5, "1m30.5s")]
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


GLOBS: list[tuple[str, str, bool]] = [
    ("qwen3-*", "qwen3-coder", True),
    ("qwen3-*", "qwen2-7b", False),
    ("*", "meta-llama/Llama-3", True),
    ("meta-llama/*", "meta-llama/Llama-3", True),
    ("*", "", True),
    ("gpt-?", "gpt-4", True),
    ("gpt-?", "gpt-40", False),
    ("model-[ab]", "model-b", True),
    ("model-[!ab]", "model-b", False),
    ("model-[!ab]", "model-c", True),
    ("a.b", "axb", False),  # regex syntax is literal
    (r"star\*", "star*", True),
    (r"star\*", "stars", False),
    ("[z-a]", "[z-a]", True),  # an impossible class: literal
    ("exact", "exact", True),
    ("exact", "Exact", False),  # case matters, as in model names
]


@pytest.mark.parametrize(("pattern", "model", "matches"), GLOBS, ids=[f"{p}~{m}" for p, m, _ in GLOBS])
def test_model_globs(pattern: str, model: str, matches: bool) -> None:
    assert Glob(pattern).matches(model) is matches


def test_a_glob_knows_when_it_names_one_model() -> None:
    assert Glob("tiny-a").literal and not Glob("tiny-*").literal and not Glob("m[12]").literal


def test_defaults() -> None:
    compiled = config(local("a"))
    assert compiled.quarantine == 15.0 and compiled.header_timeout == 120.0
    assert compiled.max_body_bytes == 16 << 20
    assert compiled.classification.mode == "header-only"
    assert compiled.classification.header == "x-llmkube-classification"
    assert compiled.classification.sensitive == DEFAULT_SENSITIVE
    assert compiled.audit.sink == "stdout" and not compiled.audit.include_body
    assert compiled.default_route is None and compiled.rules == ()


TIERS: list[tuple[dict[str, Any], str]] = [
    (local("a"), "local"),
    (local("a", tier="local"), "local"),
    (external("a"), "cloud"),  # no schema default: an unlabelled external backend is cloud
    (external("a", tier="local"), "local"),  # the owner says so (an on-premises server)
    (external("a", tier="cloud"), "cloud"),
]


@pytest.mark.parametrize(("backend", "tier"), TIERS)
def test_effective_tier(backend: dict[str, Any], tier: str) -> None:
    assert config(backend).backends["a"].tier == tier


@pytest.mark.parametrize(
    ("provider", "url", "resolved"),
    [
        ("openai", None, "https://api.openai.com"),
        ("anthropic", None, "https://api.anthropic.com"),
        ("litellm", None, None),
        ("openai", "https://gw.example.com/v1/", "https://gw.example.com/v1"),
        ("litellm", "http://litellm.gateway:4000", "http://litellm.gateway:4000"),
    ],
)
def test_provider_urls(provider: str, url: str | None, resolved: str | None) -> None:
    extra = {"url": url} if url else {}
    assert config(external("a", provider, **extra)).backends["a"].url == resolved


def test_backend_fields() -> None:
    backend = config(
        external(
            "cloud",
            "anthropic",
            "claude-x",
            credentialsSecretRef={"name": "key"},
            capabilities=["code", "vision"],
            weight=3,
            costPerMillionTokens={"promptUSD": "3", "completionUSD": "15.5"},
            healthCheck={"path": "/up"},
            timeout="30s",
        )
    ).backends["cloud"]
    assert backend.external and backend.service is None
    assert (backend.provider, backend.model, backend.credentials_secret) == ("anthropic", "claude-x", "key")
    assert backend.credential_key == "ANTHROPIC_API_KEY"
    assert backend.capabilities == {"code", "vision"} and backend.weight == 3
    assert backend.prompt_usd == pytest.approx(3e-6) and backend.completion_usd == pytest.approx(15.5e-6)
    assert backend.health_check is not None and backend.health_check.path == "/up"
    assert (backend.health_check.interval, backend.health_check.timeout) == (10, 2)
    assert backend.timeout == 30.0


def test_an_inference_service_is_reached_through_its_services_slices() -> None:
    backend = config({"name": "b", "inferenceServiceRef": {"name": "tiny.llama"}}).backends["b"]
    assert not backend.external and backend.service == "tiny-llama"
    assert backend.credential_key is None and backend.weight == 1


def test_no_credentials_no_key() -> None:
    assert config(external("a", "openai")).backends["a"].credential_key is None


def test_rules_compile() -> None:
    compiled = config(
        local("a"),
        local("b"),
        rules=[
            rule(
                "r1",
                "a",
                "b",
                match={
                    "models": ["qwen*"],
                    "headers": {"X-Team": "blue"},
                    "dataClassification": ["PII"],
                    "taskComplexity": "complex",
                    "requiredCapabilities": ["tools"],
                    "latencySLOMs": 250,
                },
                strategy="weighted",
                failClosed=True,
                timeout="5s",
            )
        ],
        defaultRoute="a",
        proxy={"quarantineDuration": "500ms", "responseHeaderTimeout": "1m", "maxRequestBodyBytes": 4096},
    )
    (r,) = compiled.rules
    assert r.backends == ("a", "b") and r.strategy == "weighted" and r.fail_closed and r.timeout == 5.0
    assert r.headers == (("x-team", "blue"),) and r.data_classification == {"pii"}
    assert r.task_complexity == "complex" and r.required_capabilities == {"tools"} and r.latency_slo == 0.25
    assert [g.pattern for g in r.models] == ["qwen*"]
    assert compiled.default_route == "a"
    assert (compiled.quarantine, compiled.header_timeout, compiled.max_body_bytes) == (0.5, 60.0, 4096)
    assert compiled.services() == {"a", "b"}


def test_policy_compiles() -> None:
    compiled = compile_config(
        {
            "backends": [local("a")],
            "policy": {
                "budgets": [
                    {"name": "all", "scope": "router", "maxTokens": 100},
                    {
                        "name": "t",
                        "scope": "team",
                        "headerKey": "X-Org",
                        "maxUSD": "2.50",
                        "windowSeconds": 60,
                    },
                ],
                "classification": {
                    "mode": "hybrid",
                    "headerKey": "X-Class",
                    "sensitiveClassifications": ["Secret"],
                },
                "auditLog": {"sink": "file", "filePath": "/audit/a.log", "includeRequestBody": True},
                "apiKeys": {"secretRef": {"name": "client-keys"}},
            },
        },
        name="r",
        namespace="ns",
        generation=4,
    )
    assert [(b.name, b.scope, b.max_tokens, b.max_usd, b.window) for b in compiled.budgets] == [
        ("all", "router", 100, None, 3600.0),
        ("t", "team", None, 2.5, 60.0),
    ]
    assert compiled.budgets[1].header_key == "x-org"
    assert compiled.classification.mode == "hybrid" and compiled.classification.header == "x-class"
    assert compiled.classification.sensitive == {"secret"}
    assert (compiled.audit.sink, compiled.audit.path, compiled.audit.include_body) == (
        "file",
        "/audit/a.log",
        True,
    )
    assert compiled.api_keys_secret == "client-keys" and compiled.generation == 4
