"""A request's admission and outcome as values (llmkube.plan.router.admission, .outcome): the body's
door, and what each way a request can end comes to (status, audit outcome, tokens charged, the
router's own answer), table-driven on the pure functions the proxy performs."""

from collections.abc import Mapping
from datetime import UTC, datetime

import orjson
import pytest

from llmkube.plan.router.admission import Admission, Body, admit, admit_body
from llmkube.plan.router.bodies import parse_cost
from llmkube.plan.router.budgets import Budgets
from llmkube.plan.router.config import Backend
from llmkube.plan.router.errors import Refused
from llmkube.plan.router.outcome import (
    ANSWERED,
    FAILED,
    GONE,
    RESET,
    UNSERVED,
    Answered,
    Failed,
    Observed,
    Ticket,
    outcome_of,
)
from llmkube.plan.router.requests import Endpoint
from llmkube.plan.router.usage import Usage
from tests.unit.router.router_factories import config, local, rule

CHAT = "chat"
AT = datetime(2026, 1, 1, tzinfo=UTC)
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 10})


class _View:
    """The router's state as admission reads it: every backend usable, nothing measured, the
    serving modes `modes` says (by Service)."""

    def __init__(self, modes: Mapping[str, str] | None = None) -> None:
        self.budgets = Budgets()
        self.modes = modes or {}

    def usable(self, backend: Backend) -> bool:
        return True

    def endpoint_count(self, backend: Backend) -> int:
        return 1

    def mode(self, backend: Backend) -> str:
        return self.modes.get(backend.service or "", "")

    def p95(self) -> Mapping[str, float]:
        return {}

    def last_draw(self, rule: str) -> float:
        return 0.0


@pytest.mark.parametrize(
    ("raw", "limit", "free", "expected"),
    [
        (None, 1 << 20, 1 << 20, (413, "too_large", True)),  # larger than the server reads
        (BODY, len(BODY) - 1, 1 << 20, (413, "too_large", True)),
        (BODY, 1 << 20, 0, (503, "busy", False)),  # fits the budget, not what is free of it now
        (b"  ", 1 << 20, 1 << 20, (400, "bad_request", False)),
    ],
)
def test_a_body_refused_at_the_door_says_why_and_whether_the_connection_ends(
    raw: bytes | None, limit: int, free: int, expected: tuple[int, str, bool]
) -> None:
    refused = admit_body(raw, CHAT, limit=limit, budget=1 << 20, free=free)
    assert isinstance(refused, Refused)
    assert (refused.status, refused.outcome, refused.close) == expected


def test_a_body_admitted_holds_its_parse_and_its_copy() -> None:
    body = admit_body(BODY, CHAT, limit=1 << 20, budget=1 << 20, free=1 << 20)
    assert isinstance(body, Body)
    assert body.holds == parse_cost(BODY) + len(BODY) and body.parsed.model == "m"


MODED = config(
    local("chat"),
    local("embed"),
    local("rank"),
    rules=[rule("qwen", "chat", "embed", match={"models": ["qwen*"]})],
    defaultRoute="chat",
)


@pytest.mark.parametrize(
    ("endpoint", "body", "modes", "order"),
    [
        ("embeddings", {"model": "qwen3", "input": "x"}, {"embed": "embedding"}, ("embed",)),
        # The default route has no embedding backend: the router's own.
        ("embeddings", {"model": "other", "input": "x"}, {"embed": "embedding"}, ("embed",)),
        ("rerank", {"model": "other", "query": "q", "documents": ["a"]}, {"rank": "rerank"}, ("rank",)),
        # A chat request stays off the rule's embedding backend.
        (
            "chat",
            {"model": "qwen3", "messages": [{"role": "user", "content": "x"}]},
            {"embed": "embedding"},
            ("chat",),
        ),
        # No backend says its mode (external ones, Services without the label): the rule stands.
        ("embeddings", {"model": "qwen3", "input": "x"}, {}, ("chat", "embed")),
    ],
)
def test_admission_sends_each_endpoint_to_the_backends_of_its_serving_mode(
    endpoint: Endpoint, body: dict[str, object], modes: dict[str, str], order: tuple[str, ...]
) -> None:
    admitted_body = admit_body(orjson.dumps(body), endpoint, limit=1 << 20, budget=1 << 20, free=1 << 20)
    assert isinstance(admitted_body, Body)
    admitted = admit(MODED, admitted_body.parsed, {}, _View(modes), 0.0)
    assert isinstance(admitted, Admission)
    assert admitted.decision.backends == order and tuple(admitted.attempts.order) == order


def _admission() -> Admission:
    body = admit_body(BODY, CHAT, limit=1 << 20, budget=1 << 20, free=1 << 20)
    assert isinstance(body, Body)
    routed = config(
        local("a", costPerMillionTokens={"promptUSD": 1_000_000, "completionUSD": 2_000_000}),
        defaultRoute="a",
    )
    admitted = admit(routed, body.parsed, {}, _View(), 0.0)
    assert isinstance(admitted, Admission)
    return admitted


TICKET = Ticket("r", "ns", "id-1", "/v1/chat/completions")
ANSWER_BODY = orjson.dumps({"usage": {"prompt_tokens": 7, "completion_tokens": 3}})


@pytest.mark.parametrize(
    ("seen", "status", "label", "usage", "answer"),
    [
        # A whole answer: the backend's usage, at its prices.
        ("answered-200", 200, "ok", Usage(7, 3), None),
        # A whole answer that is not a 2xx is charged nothing.
        ("answered-404", 404, "upstream_refused", None, None),
        # A stream without a usage chunk: a token per content event, the prompt's text (the role
        # and the content: 45 characters) at four characters a token.
        ("answered-stream", 200, "ok", Usage(prompt=12, completion=5, reported=False), None),
        # The backend's answer broke after the client had bytes of it: nothing charged.
        ("reset", 200, "upstream_reset", None, None),
        # The client left while a backend made its whole answer: what it was admitted for (its
        # prompt's 12 tokens and max_tokens 10), as how far the backend got is not known.
        ("gone-whole", 499, "client_gone", Usage(prompt=12, completion=10, reported=False), None),
        # The client left while no backend had it (between two attempts): nothing charged.
        ("gone-between", 499, "client_gone", None, None),
        # The client left a stream: what it was sent.
        ("gone-stream", 499, "client_gone", Usage(prompt=12, completion=4, reported=False), None),
        # Nothing served: every attempt timed out (504), or nothing could be tried (503).
        ("unserved-timeouts", 504, "upstream_failed", None, 504),
        ("unserved-untried", 503, "no_backend", None, 503),
        # A defect of the router: a 500 when the client had nothing yet, else its connection cut.
        ("failed-before", 500, "internal_error", None, 500),
        ("failed-after", 500, "internal_error", None, None),
    ],
)
def test_each_way_a_request_ends_comes_to_its_status_charge_and_answer(
    seen: str, status: int, label: str, usage: Usage | None, answer: int | None
) -> None:
    admission = _admission()
    backend = admission.config.backend("a")
    assert backend is not None
    answered = Answered(backend, "10.0.0.1:8080", 200)
    observed = {
        "answered-200": Observed(ANSWERED, tried=("a",), answered=answered, body=ANSWER_BODY, started=True),
        "answered-404": Observed(
            ANSWERED, tried=("a",), answered=Answered(backend, "10.0.0.1:8080", 404), body=b"{}", started=True
        ),
        "answered-stream": Observed(ANSWERED, tried=("a",), answered=answered, events=5, started=True),
        "reset": Observed(RESET, tried=("a",), answered=answered, events=2, started=True),
        "gone-whole": Observed(GONE, tried=("a",), working=backend),
        "gone-between": Observed(GONE, tried=("a",), failures=(Failed("a", "5xx", "500"),)),
        "gone-stream": Observed(
            GONE, tried=("a",), answered=answered, working=backend, events=4, started=True
        ),
        "unserved-timeouts": Observed(
            UNSERVED, tried=("a",), failures=(Failed("a", "timeout", "no answer"),)
        ),
        "unserved-untried": Observed(UNSERVED),
        "failed-before": Observed(FAILED),
        "failed-after": Observed(FAILED, answered=answered, started=True),
    }[seen]
    done = outcome_of(TICKET, admission, observed, latency=0.01, at=AT)
    assert (done.status, done.outcome, done.usage) == (status, label, usage)
    assert (done.answer.status if done.answer is not None else None) == answer
    line = orjson.loads(done.line)
    assert (line["status"], line["outcome"], line["request_id"]) == (status, label, "id-1")
    if usage is not None:
        # 1 USD a prompt token and 2 a completion token (costPerMillionTokens of a million).
        assert done.cost == pytest.approx(usage.prompt + 2 * usage.completion)
        assert done.charged is backend and line["prompt_tokens"] == usage.prompt
    else:
        assert done.cost == 0.0 and line["prompt_tokens"] is None
