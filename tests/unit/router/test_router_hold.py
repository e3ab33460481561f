"""How long a request nothing can serve waits for an InferenceService backend's endpoints: only
for what an endpoint would fix (a local backend with none ready), never past the header timeout or
the router's limit, and not at all for quarantine, external backends or sensitive data to cloud."""

from types import MappingProxyType

import pytest
from router_factories import config, external, local, rule

from llmkube.plan.router.hold import endpoint_wait
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
