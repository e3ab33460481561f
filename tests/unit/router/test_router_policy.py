"""What an admin allows a ModelRouter (plan/router/policy.py, plan/router/credential_hosts.py): each
rule table-driven, the status and the Deployment it leads to, and the router's own refusal of a
spec that would send its key elsewhere. Pure."""

from datetime import UTC, datetime
from typing import Any

import pytest
from router_factories import external, local, spec

from llmkube.api.modelrouter import ModelRouter
from llmkube.plan.allowed_hosts import parse_allowed_host, parse_allowed_hosts
from llmkube.plan.router.credential_hosts import OFFICIAL_HOSTS, credential_host_issues
from llmkube.plan.router.objects import DEFAULT_IMAGE, RouterPlanConfig, deployment
from llmkube.plan.router.policy import (
    image_allowed,
    image_issues,
    pod_security_issues,
    policy_issues,
    repository,
    service_type_issues,
)
from llmkube.plan.router.status import router_status
from llmkube.plan.router.validation import validate
from llmkube.plan.tenancy import NamespacePolicy, TenancyPolicy
from llmkube.router.state import RouterState

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
KEYS = {"credentialsSecretRef": {"name": "provider-keys"}}


def _router(body: dict[str, Any], namespace: str = "team-a") -> ModelRouter:
    return ModelRouter.model_validate(
        {"metadata": {"name": "front", "namespace": namespace, "uid": "u", "generation": 1}, "spec": body}
    )


# --- where a key may go ---------------------------------------------------------------------------


def test_the_official_hosts_are_the_providers_default_urls() -> None:
    assert dict(OFFICIAL_HOSTS) == {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}


@pytest.mark.parametrize(
    ("provider", "url", "listed", "allowed"),
    [
        # No url: the provider's own host.
        ("openai", None, "", True),
        ("anthropic", None, "", True),
        ("openai", "https://api.openai.com/v1", "", True),
        ("openai", "https://API.OpenAI.com", "", True),
        ("openai", "https://api.openai.com.", "", True),
        ("anthropic", "https://api.anthropic.com", "", True),
        # The provider's host, but not over https, or on another port, or another provider's.
        ("openai", "http://api.openai.com", "", False),
        ("openai", "https://api.openai.com:8443", "", False),
        ("openai", "https://api.anthropic.com", "", False),
        # A host of the spec author's choosing.
        ("openai", "https://collector.attacker.example/v1", "", False),
        ("openai", "https://api.openai.com.attacker.example", "", False),
        ("openai", "https://attacker.example/api.openai.com", "", False),
        ("openai", "https://10.0.0.5:4000", "", False),
        # litellm has no host of its own: only what the admin lists.
        ("litellm", "http://litellm.ai-gateway.svc:4000", "", False),
        ("litellm", "http://litellm.ai-gateway.svc:4000", "litellm.ai-gateway.svc", True),
        ("litellm", "http://litellm.ai-gateway.svc:4000", "litellm.ai-gateway.svc:4000", True),
        ("litellm", "http://litellm.ai-gateway.svc:4001", "litellm.ai-gateway.svc:4000", False),
        ("litellm", "https://eu.gateway.example", "*.gateway.example", True),
        ("litellm", "https://gateway.example", "*.gateway.example", False),
        ("litellm", "https://evilgateway.example", "*.gateway.example", False),
        ("litellm", "http://10.96.4.2:4000", "10.96.0.0/12", True),
        ("litellm", "http://[fd00:10:96::4]:4000", "fd00:10:96::/112", True),
        ("litellm", "http://[::ffff:10.96.4.2]:4000", "10.96.0.0/12", True),
        # An address entry never matches a name, nor a name entry an address.
        ("litellm", "http://litellm.svc:4000", "10.96.0.0/12", False),
        ("litellm", "http://10.96.4.2:4000", "litellm.svc", False),
        # What validation refuses is refused here too (the two may run apart).
        ("litellm", "https://user@gw.example", "gw.example", False),
        ("litellm", "https://gw.example?x=1", "gw.example", False),
        ("litellm", "https://gw.example:99999", "gw.example", False),
        ("litellm", "ftp://gw.example", "gw.example", False),
    ],
)
def test_a_key_goes_only_to_its_providers_host_or_a_listed_one(
    provider: str, url: str | None, listed: str, allowed: bool
) -> None:
    backend = external("cloud", provider, url=url, **KEYS) if url else external("cloud", provider, **KEYS)
    issues = credential_host_issues(spec(backend), parse_allowed_hosts(listed))
    assert (issues == []) == allowed, [i.text() for i in issues]
    if not allowed:
        (issue,) = issues
        assert issue.field == "spec.backends[0].external.url"
        assert 'the key comes from Secret "provider-keys"' in issue.message
        assert "--router-external-hosts" in issue.message


def test_a_backend_without_credentials_may_lead_anywhere_egress_allows() -> None:
    """It sends no key; the router's egress guard still keeps it off loopback, metadata, the API
    server (plan/router/egress.py)."""
    backends = [
        external("a", "openai", url="https://my-server.example"),
        external("b", "litellm", url="http://10.0.0.5:4000", credentialsSecretRef={"name": ""}),
        local("c"),
    ]
    assert credential_host_issues(spec(*backends), ()) == []


def test_every_credentialed_backend_is_judged_by_its_own_index() -> None:
    body = spec(
        external("ok", "anthropic", **KEYS),
        external("bad", "openai", url="https://x.example", **KEYS),
        local("l"),
        external("worse", "litellm", url="http://y.example", credentialsSecretRef={"name": "other"}),
    )
    issues = credential_host_issues(body, ())
    assert [i.field for i in issues] == ["spec.backends[1].external.url", "spec.backends[3].external.url"]
    assert 'Secret "other"' in issues[1].message and "litellm has no host of its own" in issues[1].message


@pytest.mark.parametrize(
    ("entry", "host", "port", "names"),
    [
        ("gw.example", "gw.example", 443, True),
        ("gw.example", "GW.example.", 80, True),
        ("gw.example:8443", "gw.example", 443, False),
        ("*.gw.example", "a.b.gw.example", 443, True),
        ("*.gw.example", "gw.example", 443, False),
        ("10.1.2.3", "10.1.2.3", 80, True),
        ("10.1.0.0/16", "10.1.2.3", 80, True),
        ("10.1.0.0/16", "10.2.0.1", 80, False),
        ("[fd12::3]:8080", "fd12::3", 8080, True),
        ("10.1.2.3", "ten.example", 80, False),
    ],
)
def test_an_entry_names_a_url_host_as_written(entry: str, host: str, port: int, names: bool) -> None:
    found = parse_allowed_host(entry)
    assert found.names(host, port) is names
    assert found.entry == entry


# --- the proxy image ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "repo"),
    [
        ("ghcr.io/llmkube/llmkube:0.3.0", "ghcr.io/llmkube/llmkube"),
        ("registry:5000/team/router", "registry:5000/team/router"),
        ("registry:5000/team/router:1@sha256:ab", "registry:5000/team/router"),
        ("router@sha256:ab", "router"),
        ("localhost/llmkube:dev", "localhost/llmkube"),
    ],
)
def test_the_repository_of_a_reference(image: str, repo: str) -> None:
    assert repository(image) == repo


MIRROR = RouterPlanConfig(
    image="ghcr.io/llmkube/llmkube:0.3.0",
    allowed_images=("registry.example/llmkube", "registry.example/pinned:1.0"),
)


@pytest.mark.parametrize(
    ("image", "allowed"),
    [
        ("ghcr.io/llmkube/llmkube:0.3.0", True),  # --router-image, named outright
        ("ghcr.io/llmkube/llmkube:0.2.9", False),  # another tag of ours: not what the controller runs
        ("ghcr.io/llmkube/llmkube", False),
        ("registry.example/llmkube:0.3.0", True),  # a listed repository: any tag or digest
        ("registry.example/llmkube@sha256:0123", True),
        ("registry.example/llmkube-evil:0.3.0", False),
        ("registry.example/llmkube/evil:1", False),
        ("registry.example/pinned:1.0", True),  # a listed reference with a tag: exactly it
        ("registry.example/pinned:1.1", False),
        ("registry.example/pinned", False),
        ("docker.io/attacker/router:latest", False),
    ],
)
def test_a_proxy_image_is_ours_or_listed(image: str, allowed: bool) -> None:
    assert image_allowed(image, MIRROR) is allowed
    issues = image_issues(_router(spec(local("a"), proxy={"image": image})), MIRROR)
    assert (issues == []) is allowed
    if not allowed:
        assert issues[0].field == "spec.proxy.image"
        assert "--router-allowed-images (registry.example/llmkube, registry.example/pinned:1.0)" in (
            issues[0].message
        )


def test_no_proxy_image_is_the_controllers_own() -> None:
    assert image_issues(_router(spec(local("a"))), RouterPlanConfig()) == []
    made = deployment(_router(spec(local("a"))), RouterPlanConfig())
    assert made["spec"]["template"]["spec"]["containers"][0]["image"] == DEFAULT_IMAGE


# --- the Service type -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "allowed_types", "refused"),
    [
        (None, {"ClusterIP"}, None),
        ({"type": "ClusterIP"}, {"ClusterIP"}, None),
        ({"type": "LoadBalancer"}, {"ClusterIP"}, "LoadBalancer"),
        ({"type": "NodePort"}, {"ClusterIP"}, "NodePort"),
        ({"type": "NodePort"}, {"ClusterIP", "NodePort"}, None),
        ({"type": "LoadBalancer"}, {"ClusterIP", "NodePort", "LoadBalancer"}, None),
        ({"port": 9000}, {"ClusterIP"}, None),
    ],
)
def test_the_service_type_is_among_the_allowed(
    endpoint: dict[str, Any] | None, allowed_types: set[str], refused: str | None
) -> None:
    body = spec(local("a"), **({"endpoint": endpoint} if endpoint else {}))
    issues = service_type_issues(_router(body), TenancyPolicy(allowed_service_types=frozenset(allowed_types)))
    assert [i.field for i in issues] == (["spec.endpoint.type"] if refused else [])
    if refused:
        assert issues[0].message.startswith(f'Service type "{refused}" is not allowed: this cluster allows')


# --- Pod Security ---------------------------------------------------------------------------------

HOSTILE_SPECS = [
    spec(local("a")),
    spec(local("a"), proxy={"replicas": 3, "resources": {"limits": {"memory": "1Gi"}}}),
    spec(
        external("c", **KEYS),
        policy={"apiKeys": {"secretRef": {"name": "clients"}}, "auditLog": {"sink": "file"}},
    ),
]


@pytest.mark.parametrize("body", HOSTILE_SPECS)
@pytest.mark.parametrize("level", ["privileged", "baseline", "restricted"])
def test_the_router_pod_meets_every_level_for_every_spec(body: dict[str, Any], level: str) -> None:
    made = deployment(_router(body), RouterPlanConfig())
    policy = TenancyPolicy(max_pod_security=level)  # type: ignore[arg-type]
    ns = NamespacePolicy(known=True, enforce=level)  # type: ignore[arg-type]
    assert pod_security_issues(made, "team-a", policy, ns) == []


def test_a_pod_beyond_the_levels_is_refused_naming_where() -> None:
    """The check looks at the pod as built: were the builder ever to let more through, it is caught."""
    made = deployment(_router(spec(local("a"))), RouterPlanConfig())
    container = made["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"] = {**container["securityContext"], "privileged": True}
    container["securityContext"].pop("runAsNonRoot")
    made["spec"]["template"]["spec"]["securityContext"].pop("runAsNonRoot")
    issues = pod_security_issues(
        made, "team-a", TenancyPolicy(max_pod_security="baseline"), NamespacePolicy(known=True)
    )
    assert [i.field for i in issues] == [
        "Deployment spec.template.spec.containers[0].securityContext.privileged (set by the controller)"
    ]
    assert 'Pod Security "baseline" (the controller\'s --max-pod-security) forbids privileged' in (
        issues[0].message
    )
    restricted = pod_security_issues(
        made, "team-a", TenancyPolicy(), NamespacePolicy(known=True, enforce="restricted")
    )
    assert any(
        "namespace 'team-a''s pod-security.kubernetes.io/enforce label" in i.message for i in restricted
    )
    assert any("runAsNonRoot" in i.message for i in restricted)


# --- all of them, and what the status says ----------------------------------------------------------


def test_every_hostile_field_at_once_is_one_issue_each() -> None:
    body = spec(
        external("cloud", "openai", url="https://collector.attacker.example", **KEYS),
        endpoint={"type": "LoadBalancer"},
        proxy={"image": "docker.io/attacker/router:latest", "imagePullSecrets": [{"name": "regcred"}]},
    )
    router = _router(body)
    issues = policy_issues(router, body, RouterPlanConfig(), NamespacePolicy(known=True))
    assert [i.field for i in issues] == [
        "spec.endpoint.type",
        "spec.proxy.image",
        "spec.backends[0].external.url",
    ]
    status = router_status(
        router, body, validate(body, "front"), deployment=None, isvcs={}, now=NOW, violations=issues
    )
    conditions = {c.type: c for c in status.conditions or ()}
    assert status.phase == "Failed"
    assert (conditions["Ready"].status, conditions["Ready"].reason) == ("False", "PolicyViolation")
    assert (conditions["Stalled"].status, conditions["Stalled"].reason) == ("True", "PolicyViolation")
    assert (conditions["Reconciling"].status, conditions["Reconciling"].reason) == (
        "False",
        "PolicyViolation",
    )
    message = conditions["Ready"].message
    assert message.startswith("The spec asks for what this cluster does not allow: spec.endpoint.type: ")
    assert "spec.proxy.image: " in message and "spec.backends[0].external.url: " in message


def test_an_allowed_spec_has_no_issue_and_a_listed_host_reaches_the_router_pods() -> None:
    body = spec(
        external("gw", "litellm", url="http://litellm.gateway.svc:4000", **KEYS),
        endpoint={"type": "NodePort"},
        proxy={"image": "registry.example/llmkube:0.3.0"},
    )
    config = RouterPlanConfig(
        tenancy=TenancyPolicy(allowed_service_types=frozenset({"ClusterIP", "NodePort"})),
        allowed_images=("registry.example/llmkube",),
        external_hosts=parse_allowed_hosts("litellm.gateway.svc, *.internal.example"),
    )
    assert policy_issues(_router(body), body, config, NamespacePolicy(known=True, enforce="restricted")) == []
    args = deployment(_router(body), config)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-1] == "--external-hosts=litellm.gateway.svc,*.internal.example"
    # Without the flag the router's arguments are what they always were (no rollout on upgrade).
    plain = deployment(_router(body), RouterPlanConfig())["spec"]["template"]["spec"]["containers"][0]
    assert plain["args"] == ["--model-router=front", "--log-format=json"]


def test_an_invalid_spec_stays_invalid_spec_and_names_the_violations_too() -> None:
    body = spec(local("a"), defaultRoute="nowhere", endpoint={"type": "LoadBalancer"})
    router = _router(body)
    issues = policy_issues(router, body, RouterPlanConfig(), NamespacePolicy())
    status = router_status(
        router, body, validate(body, "front"), deployment=None, isvcs={}, now=NOW, violations=issues
    )
    ready = next(c for c in status.conditions or () if c.type == "Ready")
    assert ready.reason == "InvalidSpec"
    assert "spec.defaultRoute" in ready.message and "spec.endpoint.type" in ready.message


# --- the router itself ----------------------------------------------------------------------------


def _object(body: dict[str, Any], generation: int) -> dict[str, Any]:
    return {"metadata": {"name": "front", "generation": generation}, "spec": body}


def test_a_running_router_keeps_its_spec_when_an_edit_would_send_its_key_elsewhere() -> None:
    """The controller leaves a running router's objects alone for a refused spec; the router
    watches its spec itself, and must not follow the edit to a host of the editor's choosing."""
    state = RouterState("front", "team-a")
    good = spec(external("cloud", "openai", **KEYS))
    assert not state.load(_object(good, 1)).refused
    edited = spec(external("cloud", "openai", url="https://collector.attacker.example", **KEYS))
    loaded = state.load(_object(edited, 2))
    assert loaded.refused and [i.field for i in loaded.issues] == ["spec.backends[0].external.url"]
    assert state.config is not None and state.config.generation == 1
    backend = state.config.backend("cloud")
    assert backend is not None and backend.url == "https://api.openai.com"
    # The same edit to a host the admin listed (the controller passes --external-hosts) is loaded.
    allowing = RouterState("front", "team-a", external_hosts=parse_allowed_hosts("*.attacker.example"))
    assert not allowing.load(_object(edited, 2)).refused


def test_the_router_loads_a_keyless_backend_anywhere() -> None:
    state = RouterState("front", "team-a")
    assert not state.load(_object(spec(external("x", "openai", url="https://mine.example")), 1)).refused
