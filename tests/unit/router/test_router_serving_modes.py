"""/v1/embeddings and /v1/rerank go to the backends that serve them (an InferenceService of mode
embedding or rerank, as its Service's label says), and chat requests stay off those backends."""

from types import MappingProxyType

import pytest
from router_factories import config, external, local, rule

from llmkube.plan.inferenceservice.serving_mode import MODE_LABEL as PLANNED_LABEL
from llmkube.plan.router.endpoints import MODE_LABEL, serving_mode
from llmkube.plan.router.matching import Features, decide, for_endpoint
from llmkube.plan.router.requests import parse_request

ROUTER = config(
    local("chat"),
    local("embed"),
    local("rank"),
    external("cloud", tier="cloud"),
    rules=[rule("qwen", "chat", "embed", match={"models": ["qwen*"]})],
    defaultRoute="chat",
)
MODES = {"chat": "chat", "embed": "embedding", "rank": "rerank", "cloud": ""}


@pytest.mark.parametrize(
    ("model", "endpoint", "backends"),
    [
        ("qwen3", "embeddings", ("embed",)),  # the rule's own embedding backend
        ("other", "embeddings", ("embed",)),  # the default has none: the router's
        ("other", "rerank", ("rank",)),
        ("qwen3", "chat", ("chat",)),  # the embedding backend of the rule is left out
        ("other", "completions", ("chat",)),
    ],
)
def test_requests_go_to_backends_of_their_mode(model: str, endpoint: str, backends: tuple[str, ...]) -> None:
    decision = decide(ROUTER, Features(model, "", "", MappingProxyType({})))
    assert for_endpoint(ROUTER, decision, endpoint, MODES.__getitem__).backends == backends


def test_without_any_backend_of_the_mode_the_decision_stands() -> None:
    decision = decide(ROUTER, Features("other", "", "", MappingProxyType({})))
    unknown = {name: "" for name in MODES}
    assert for_endpoint(ROUTER, decision, "embeddings", unknown.__getitem__) == decision


def test_the_mode_is_read_from_the_slices_label() -> None:
    assert PLANNED_LABEL == MODE_LABEL  # the controller writes what the router reads
    labelled = {"metadata": {"labels": {MODE_LABEL: "embedding"}}}
    assert serving_mode([{"metadata": {}}, labelled]) == "embedding"
    assert serving_mode([{"metadata": {"labels": {}}}]) == ""


def test_a_rerank_request_is_parsed_as_one() -> None:
    parsed = parse_request(b'{"model":"m","query":"q","documents":["a","b"],"stream":true}', "rerank")
    assert not isinstance(parsed, Exception) and hasattr(parsed, "endpoint")
    assert parsed.endpoint == "rerank"  # type: ignore[union-attr]
    assert parsed.stream is False  # type: ignore[union-attr]
    assert parsed.prompt_text() == "q\na\nb"  # type: ignore[union-attr]
