"""Which rule a request falls under, and which backends it then tries: every kind of condition,
alone and together, the defaultRoute, and each strategy with backends that cannot serve."""

from types import MappingProxyType

import pytest
from router_factories import config, external, local, rule

from llmkube.plan.router.matching import Features, decide
from llmkube.plan.router.strategy import attempts, next_draw, weighted_choice
from llmkube.plan.router.timeouts import header_timeout

ROUTER = config(
    local("a", capabilities=["code", "tools"]),
    local("b", capabilities=["code"]),
    external("c", tier="cloud", capabilities=["code", "vision"]),
    rules=[
        rule("pii", "a", match={"dataClassification": ["pii", "phi"]}, failClosed=True),
        rule("hard", "c", "a", match={"taskComplexity": "complex"}),
        rule("qwen", "b", match={"models": ["qwen3-*", "qwen2.5-coder"]}),
        rule("blue", "a", match={"headers": {"X-Team": "blue"}}),
        rule("vision", "a", "c", match={"models": ["see-*"], "requiredCapabilities": ["vision"]}),
        rule("both", "a", match={"models": ["tools-*"], "headers": {"x-mode": "agent"}}),
        rule("never", "b", match={"models": ["never"], "requiredCapabilities": ["audio"]}),
    ],
    defaultRoute="b",
)


def features(model: str = "m", classification: str = "", complexity: str = "", **headers: str) -> Features:
    return Features(model, classification, complexity, MappingProxyType(headers))


CASES: list[tuple[str, Features, str, tuple[str, ...]]] = [
    ("classification", features(classification="pii"), "pii", ("a",)),
    ("classification, second value", features(classification="phi"), "pii", ("a",)),
    ("classification first: wins over later rules", features("qwen3-x", classification="pii"), "pii", ("a",)),
    ("complexity", features(complexity="complex"), "hard", ("c", "a")),
    ("complexity, other value", features(complexity="simple"), "default", ("b",)),
    ("model glob", features("qwen3-coder"), "qwen", ("b",)),
    ("model literal", features("qwen2.5-coder"), "qwen", ("b",)),
    ("model not matching", features("llama"), "default", ("b",)),
    ("header", features(**{"x-team": "blue"}), "blue", ("a",)),
    ("header value differs", features(**{"x-team": "Blue"}), "default", ("b",)),
    ("capabilities: some backend has them", features("see-1"), "vision", ("a", "c")),
    ("capabilities: no backend has them", features("never"), "default", ("b",)),
    ("every condition of a rule", features("tools-x", **{"x-mode": "agent"}), "both", ("a",)),
]


@pytest.mark.parametrize(
    ("case", "request_features", "rule_name", "backends"), CASES, ids=[c[0] for c in CASES]
)
def test_first_matching_rule(
    case: str, request_features: Features, rule_name: str, backends: tuple[str, ...]
) -> None:
    decision = decide(ROUTER, request_features)
    assert (decision.rule_name, decision.backends) == (rule_name, backends)


def test_a_rule_only_part_of_whose_conditions_hold_does_not_match() -> None:
    router = config(
        local("a"),
        local("b"),
        rules=[rule("both", "a", match={"models": ["x"], "headers": {"h": "1"}})],
        defaultRoute="b",
    )
    assert decide(router, features("x")).rule_name == "default"
    assert decide(router, features("y", h="1")).rule_name == "default"
    assert decide(router, features("x", h="1")).rule_name == "both"


def test_no_rule_and_no_default_route() -> None:
    router = config(local("a"), rules=[rule("x", "a", match={"models": ["x"]})])
    decision = decide(router, features("y"))
    assert decision.backends == () and decision.rule_name == "none"


def test_a_rule_without_match_matches_everything() -> None:
    router = config(local("a"), local("b"), rules=[rule("all", "a")], defaultRoute="b")
    assert decide(router, features("anything")).rule_name == "all"


def test_fail_closed_is_carried() -> None:
    assert decide(ROUTER, features(classification="pii")).fail_closed
    assert not decide(ROUTER, features(complexity="complex")).fail_closed


def _all(name: str) -> bool:
    return True


def test_primary_fallback_keeps_the_route_order_and_skips_what_cannot_serve() -> None:
    decision = decide(ROUTER, features(complexity="complex"))
    assert attempts(ROUTER, decision, _all).order == ("c", "a")
    assert attempts(ROUTER, decision, lambda n: n != "c").order == ("a",)
    assert attempts(ROUTER, decision, lambda n: False).order == ()


def test_required_capabilities_narrow_the_route() -> None:
    decision = decide(ROUTER, features("see-2"))  # the vision rule: a has no vision
    assert decision.rule_name == "vision"
    assert attempts(ROUTER, decision, _all).order == ("c",)


def test_latency_slo_promotes_the_next_backend_within_it() -> None:
    router = config(
        local("a"), local("b"), local("c"), rules=[rule("fast", "a", "b", "c", match={"latencySLOMs": 200})]
    )
    decision = decide(router, features())
    assert attempts(router, decision, _all, p95={"a": 0.1}).order == ("a", "b", "c")
    assert attempts(router, decision, _all, p95={"a": 0.5, "b": 0.3}).order == ("c", "a", "b")
    assert attempts(router, decision, _all, p95={"a": 0.5}).order == ("b", "a", "c")  # b not measured yet
    assert attempts(router, decision, _all, p95={"a": 0.5, "b": 0.5, "c": 0.5}).order == ("a", "b", "c")


def test_weighted_draw() -> None:
    router = config(
        local("a", weight=1),
        local("b", weight=3),
        local("z", weight=0),
        rules=[rule("w", "a", "b", "z", strategy="weighted")],
    )
    backends = list(router.backends.values())
    assert [weighted_choice(backends, d).name for d in (0.0, 0.24, 0.25, 0.99)] == ["a", "a", "b", "b"]  # type: ignore[union-attr]
    decision = decide(router, features())
    assert attempts(router, decision, _all, draw=0.9).order == ("b", "a", "z")  # the others fall back
    assert attempts(router, decision, lambda n: n != "b", draw=0.9).order == ("a", "z")
    assert attempts(router, decision, lambda n: n == "z").order == ()  # weight 0 is never drawn


def test_weighted_shares_over_many_draws() -> None:
    router = config(
        local("a", weight=1), local("b", weight=3), rules=[rule("w", "a", "b", strategy="weighted")]
    )
    decision = decide(router, features())
    counts = {"a": 0, "b": 0}
    for i in range(1000):
        counts[attempts(router, decision, _all, draw=(i + 0.5) / 1000).order[0]] += 1
    assert counts == {"a": 250, "b": 750}


@pytest.mark.parametrize("start", [0.0, 0.123, 0.5, 0.999])
@pytest.mark.parametrize("weights", [(75, 25), (1, 3), (1, 1, 1), (10, 0, 90), (1, 99), (5, 3, 2)])
def test_weighted_draws_in_sequence_keep_every_share_within_three_requests(
    start: float, weights: tuple[int, ...]
) -> None:
    names = [f"b{i}" for i in range(len(weights))]
    router = config(
        *(local(n, weight=w) for n, w in zip(names, weights, strict=True)),
        rules=[rule("w", *names, strategy="weighted")],
    )
    decision = decide(router, features())
    counts = dict.fromkeys(names, 0)
    draw = start
    for n in range(1, 1001):
        draw = next_draw(draw)
        assert 0.0 <= draw < 1.0
        counts[attempts(router, decision, _all, draw=draw).order[0]] += 1
        for name, weight in zip(names, weights, strict=True):
            # at every point of the run, not only at its end
            assert abs(counts[name] - n * weight / sum(weights)) <= 3, (n, counts)


def test_shadow() -> None:
    router = config(local("a"), local("b"), local("c"), rules=[rule("s", "a", "b", "c", strategy="shadow")])
    decision = decide(router, features())
    assert attempts(router, decision, _all) == attempts(router, decision, _all)
    found = attempts(router, decision, _all)
    assert (found.order, found.shadows) == (("a",), ("b", "c"))
    found = attempts(router, decision, lambda n: n != "b")
    assert (found.order, found.shadows) == (("a",), ("c",))
    # The primary cannot serve: no answer (a shadow never answers a client).
    assert attempts(router, decision, lambda n: n != "a").order == ()


@pytest.mark.parametrize(
    ("rule_timeout", "backend_timeout", "cap", "expected"),
    [
        (None, None, 120.0, 120.0),
        ("5s", "30s", 120.0, 5.0),
        (None, "30s", 120.0, 30.0),
        ("300s", None, 120.0, 120.0),
        (None, "300s", 60.0, 60.0),
    ],
)
def test_header_timeout(
    rule_timeout: str | None, backend_timeout: str | None, cap: float, expected: float
) -> None:
    router = config(
        local("a", **({"timeout": backend_timeout} if backend_timeout else {})),
        rules=[rule("r", "a", **({"timeout": rule_timeout} if rule_timeout else {}))],
    )
    assert header_timeout(router.rules[0], router.backends["a"], cap) == expected
    if rule_timeout is None:
        assert header_timeout(None, router.backends["a"], cap) == expected
