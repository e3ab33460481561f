"""How long a request nothing can serve waits for an InferenceService backend's endpoints: only
for what an endpoint would fix (a local backend with none ready), never past the header timeout or
the router's limit, and not at all for quarantine, external backends or sensitive data to cloud."""

from types import MappingProxyType

import pytest
from router_factories import config, external, local, rule

from llmkube.plan.router.hold import endpoint_wait, sleeping
from llmkube.plan.router.matching import Features, decide

ROUTER = config(
    local("a"),
    local("b", timeout="10s"),
    local("cloudy", tier="cloud"),
    external("ext", tier="cloud"),
    rules=[
        rule("one", "a", match={"models": ["one"]}),
        rule("fast", "a", match={"models": ["fast"]}, timeout="3s"),
        rule("pair", "a", "b", match={"models": ["pair"]}),
        rule("short", "b", match={"models": ["short"]}),
        rule("out", "ext", match={"models": ["out"]}),
        rule("mixed", "ext", "a", match={"models": ["mixed"]}),
        rule("cloud", "cloudy", match={"models": ["cloud"]}),
        rule("shadow", "ext", "a", match={"models": ["shadow"]}, strategy="shadow"),
        rule("shadowed", "a", "ext", match={"models": ["shadowed"]}, strategy="shadow"),
    ],
    proxy={"responseHeaderTimeout": "60s"},
)

CASES: list[tuple[str, str, dict[str, int], bool, float, float]] = [
    # (case, model, ready endpoints by backend, sensitive, limit, expected wait)
    ("a local backend with no endpoint: waits up to the limit", "one", {}, False, 30.0, 30.0),
    ("the header timeout bounds the wait", "one", {}, False, 90.0, 60.0),
    ("so does the rule's timeout", "fast", {}, False, 30.0, 3.0),
    ("and the backend's", "short", {}, False, 30.0, 10.0),
    ("the longest of the route's backends that have none", "pair", {}, False, 30.0, 30.0),
    ("a backend with endpoints (in quarantine, then): no wait", "one", {"a": 1}, False, 30.0, 0.0),
    ("one with endpoints, one without: wait for the one", "pair", {"a": 2}, False, 30.0, 10.0),
    ("an external backend: nothing to wait for", "out", {}, False, 30.0, 0.0),
    ("external first, local next: wait for the local", "mixed", {}, False, 30.0, 30.0),
    ("sensitive data never waits for a cloud backend", "cloud", {}, True, 30.0, 0.0),
    ("a cloud InferenceService for ordinary data", "cloud", {}, False, 30.0, 30.0),
    ("shadow: only the answering backend counts", "shadow", {}, False, 30.0, 0.0),
    ("shadow: a local answering backend", "shadowed", {}, False, 30.0, 30.0),
    ("a limit of 0 turns waiting off", "one", {}, False, 0.0, 0.0),
]


@pytest.mark.parametrize(
    ("case", "model", "ready", "sensitive", "limit", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_endpoint_wait(
    case: str, model: str, ready: dict[str, int], sensitive: bool, limit: float, expected: float
) -> None:
    decision = decide(ROUTER, Features(model, "", "", MappingProxyType({})))
    assert endpoint_wait(ROUTER, decision, ready, sensitive=sensitive, limit=limit) == expected


WAKE_CASES: list[tuple[str, str, frozenset[str], bool, float, float, tuple[str, ...]]] = [
    # (case, model, asleep backends, sensitive, wake limit, expected wait, backends it would wake)
    (
        "a sleeping backend: the wake limit, not the endpoint wait",
        "one",
        frozenset({"a"}),
        False,
        50.0,
        50.0,
        ("a",),
    ),
    ("the header timeout bounds a wake too", "one", frozenset({"a"}), False, 300.0, 60.0, ("a",)),
    ("and the rule's timeout", "fast", frozenset({"a"}), False, 300.0, 3.0, ("a",)),
    ("one asleep, one between pods: the longer", "pair", frozenset({"b"}), False, 300.0, 30.0, ("b",)),
    ("shadow: only the answering backend is woken", "shadow", frozenset({"a"}), False, 300.0, 0.0, ()),
    ("sensitive data wakes no cloud backend", "cloud", frozenset({"cloudy"}), True, 300.0, 0.0, ()),
    ("a wake limit of 0 waits as for a rollout", "one", frozenset({"a"}), False, 0.0, 0.0, ("a",)),
]


@pytest.mark.parametrize(
    ("model", "asleep", "sensitive", "wake_limit", "expected", "woken"),
    [case[1:] for case in WAKE_CASES],
    ids=[case[0] for case in WAKE_CASES],
)
def test_a_sleeping_backend_is_waited_for_as_long_as_a_wake_takes(
    model: str,
    asleep: frozenset[str],
    sensitive: bool,
    wake_limit: float,
    expected: float,
    woken: tuple[str, ...],
) -> None:
    decision = decide(ROUTER, Features(model, "", "", MappingProxyType({})))
    found = endpoint_wait(
        ROUTER,
        decision,
        {},
        sensitive=sensitive,
        limit=30.0 if wake_limit else 0.0,
        asleep=asleep,
        wake_limit=wake_limit,
    )
    assert found == expected
    assert sleeping(ROUTER, decision, asleep, sensitive=sensitive) == woken
