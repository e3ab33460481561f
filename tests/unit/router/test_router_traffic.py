"""What the router reads and writes on the wire: request bodies, the body sent upstream, usage of
answers and streams (the injected usage chunk taken out), endpoints from EndpointSlices, the choice
of a pod (least in flight, prefix affinity), provider URLs and headers, error bodies, audit lines."""

import json
from collections import Counter
from typing import Any

import orjson
import pytest

from llmkube.plan.router.audit import AuditRecord, audit_line
from llmkube.plan.router.balancer import AFFINITY_SLACK, choose, preferred
from llmkube.plan.router.endpoints import ready_endpoints
from llmkube.plan.router.errors import Refused, not_found
from llmkube.plan.router.providers import auth_headers, upstream_url
from llmkube.plan.router.requests import ParsedRequest, parse_request, upstream_body
from llmkube.plan.router.usage import StreamUsage, Usage, estimate, usage_of_body

BAD_BODIES: list[tuple[bytes, str]] = [
    (b"", "invalid_body"),
    (b"   ", "invalid_body"),
    (b"{not json", "invalid_json"),
    (b"[1, 2]", "invalid_body"),
    (b'"text"', "invalid_body"),
    (b'{"messages": []}', "missing_model"),
    (b'{"model": 3}', "missing_model"),
    (b'{"model": ""}', "missing_model"),
    (b"\xff\xfe", "invalid_json"),
]


@pytest.mark.parametrize(("raw", "code"), BAD_BODIES)
def test_bad_bodies_are_refused_in_openai_shape(raw: bytes, code: str) -> None:
    refused = parse_request(raw, "chat")
    assert isinstance(refused, Refused) and refused.status == 400 and refused.code == code
    error = orjson.loads(refused.body())["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"


def _parsed(body: dict[str, Any], endpoint: str = "chat") -> ParsedRequest:
    parsed = parse_request(orjson.dumps(body), endpoint)  # type: ignore[arg-type]
    assert isinstance(parsed, ParsedRequest)
    return parsed


def test_the_body_goes_upstream_unchanged_unless_it_must_change() -> None:
    raw = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    parsed = parse_request(raw, "chat")
    assert isinstance(parsed, ParsedRequest)
    body, injected = upstream_body(parsed, raw, model=None)
    assert body is raw and not injected  # the very bytes: nothing parsed is serialised again
    body, injected = upstream_body(parsed, raw, model="m")
    assert body is raw and not injected


def test_an_external_model_rewrites_the_body() -> None:
    parsed = _parsed({"model": "any", "messages": [], "temperature": 0})
    body, injected = upstream_body(parsed, b"", model="claude-x")
    assert orjson.loads(body) == {"model": "claude-x", "messages": [], "temperature": 0} and not injected


def test_a_stream_asks_for_usage_when_the_client_did_not() -> None:
    parsed = _parsed({"model": "m", "stream": True, "stream_options": {"other": 1}})
    body, injected = upstream_body(parsed, b"", model=None)
    assert injected and orjson.loads(body)["stream_options"] == {"other": 1, "include_usage": True}
    asked = _parsed({"model": "m", "stream": True, "stream_options": {"include_usage": True}})
    assert asked.client_wants_usage and upstream_body(asked, b"raw", model=None) == (b"raw", False)
    assert not _parsed({"model": "m", "input": "x", "stream": True}, "embeddings").stream


def test_prompt_text_of_each_endpoint() -> None:
    chat = _parsed(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            ],
        }
    )
    assert chat.prompt_text() == "system\nbe brief\nuser\nhi"
    assert chat.affinity_key(8) == b"system\nb"
    assert _parsed({"model": "m", "prompt": ["a", "b"]}, "completions").prompt_text() == "a\nb"
    assert _parsed({"model": "m", "input": "x"}, "embeddings").prompt_text() == "x"
    assert _parsed({"model": "m", "messages": "nonsense"}).prompt_text() == ""


def test_usage_of_an_answer() -> None:
    answer = {"choices": [], "usage": {"prompt_tokens": 27, "completion_tokens": 3, "total_tokens": 30}}
    assert usage_of_body(orjson.dumps(answer)) == Usage(27, 3)
    embeddings = {"data": [], "usage": {"prompt_tokens": 5, "total_tokens": 5}}
    assert usage_of_body(orjson.dumps(embeddings)) == Usage(5, 0)
    assert usage_of_body(b'{"choices": []}') is None
    assert usage_of_body(b'{"usage": "lots"}') is None
    assert usage_of_body(b'not json but "usage"') is None
    assert Usage(1000, 500).cost(3e-6, 15e-6) == pytest.approx(0.0105)
    assert estimate(10, 3) == Usage(3, 3, reported=False)


def _event(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


DELTA = {"choices": [{"index": 0, "delta": {"content": "x"}}]}
FINAL = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}


def test_a_stream_passes_through_untouched_but_for_the_usage_chunk_the_router_asked_for() -> None:
    follower = StreamUsage(strip_injected=True)
    first = _event(DELTA)
    assert follower.feed(first) is first  # the same bytes object: not copied
    tail = _event(FINAL) + b"data: [DONE]\n\n"
    assert follower.feed(tail) == b"data: [DONE]\n\n"
    assert follower.usage == Usage(9, 2)


def test_the_clients_own_usage_chunk_is_kept() -> None:
    follower = StreamUsage(strip_injected=False)
    tail = _event(FINAL) + b"data: [DONE]\n\n"
    assert follower.feed(tail) == tail and follower.usage == Usage(9, 2)


def test_usage_on_a_chunk_with_choices_is_kept() -> None:
    """Servers that put usage on the last content chunk: that chunk goes to the client as is."""
    follower = StreamUsage(strip_injected=True)
    last = _event({**DELTA, "usage": FINAL["usage"]})
    assert follower.feed(last) == last and follower.usage == Usage(9, 2)


def test_usage_split_across_chunks() -> None:
    follower = StreamUsage(strip_injected=True)
    event = _event(FINAL)
    sent = follower.feed(event[:20]) + follower.feed(event[20:]) + follower.feed(b"data: [DONE]\n\n")
    assert follower.usage == Usage(9, 2)
    assert sent == event + b"data: [DONE]\n\n"  # half of it had gone out already: nothing taken out


def test_nulls_and_crlf() -> None:
    follower = StreamUsage(strip_injected=True)
    with_null = _event({**DELTA, "usage": None})
    assert follower.feed(with_null) is with_null
    crlf = b"data: " + orjson.dumps(FINAL) + b"\r\n\r\ndata: [DONE]\r\n\r\n"
    assert follower.feed(crlf) == b"data: [DONE]\r\n\r\n"
    assert follower.usage == Usage(9, 2)


@pytest.mark.parametrize("null_usage", [False, True], ids=["plain", "usage-null-on-every-event"])
def test_a_whole_answer_in_one_chunk(null_usage: bool) -> None:
    """A fast backend's 200 events arrive as one chunk: only the injected usage event leaves it."""
    delta = {**DELTA, "usage": None} if null_usage else DELTA
    events = _event(delta) * 200
    follower = StreamUsage(strip_injected=True)
    assert follower.feed(events + _event(FINAL) + b"data: [DONE]\n\n") == events + b"data: [DONE]\n\n"
    assert follower.usage == Usage(9, 2) and follower.content_events == 201


def test_two_usage_objects_on_one_line_are_read_once() -> None:
    follower = StreamUsage(strip_injected=True)
    event = {"choices": [], "usage": FINAL["usage"], "x_usage": {"usage": {"prompt_tokens": 1}}}
    assert follower.feed(_event(event) + b"data: [DONE]\n\n") == b"data: [DONE]\n\n"
    assert follower.usage == Usage(9, 2)


def test_events_are_counted_for_estimates() -> None:
    follower = StreamUsage(strip_injected=True)
    for _ in range(5):
        follower.feed(_event(DELTA))
    follower.feed(b"data: [DONE]\n\n")
    assert follower.usage is None and follower.content_events == 5


def _slice(
    endpoints: list[dict[str, Any]], ports: list[dict[str, Any]], family: str = "IPv4"
) -> dict[str, Any]:
    return {"addressType": family, "ports": ports, "endpoints": endpoints}


def _ep(ip: str, ready: bool | None = True, terminating: bool | None = None) -> dict[str, Any]:
    conditions: dict[str, Any] = {}
    if ready is not None:
        conditions["ready"] = ready
    if terminating is not None:
        conditions["terminating"] = terminating
    return {"addresses": [ip], "conditions": conditions}


def test_ready_endpoints() -> None:
    http = [{"name": "http", "port": 8080, "protocol": "TCP"}]
    slices = [
        _slice([_ep("10.0.0.1"), _ep("10.0.0.2", ready=False), _ep("10.0.0.3", ready=None)], http),
        _slice([_ep("10.0.0.4", ready=True, terminating=True), _ep("10.0.0.1")], http),  # a duplicate
        _slice([_ep("fd00::5")], http, "IPv6"),
        _slice(
            [_ep("10.0.0.9")], [{"name": "metrics", "port": 9090}, {"name": "other", "port": 1}]
        ),  # no http port
        _slice([_ep("10.0.0.8")], [{"name": "only", "port": 7000}]),  # one port: that one
        _slice([_ep("svc.example.com")], http, "FQDN"),
        _slice([{"addresses": [], "conditions": {}}], http),
    ]
    assert ready_endpoints(slices) == ("10.0.0.1:8080", "10.0.0.3:8080", "10.0.0.8:7000", "[fd00::5]:8080")


PODS = ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]


def test_least_in_flight_without_a_prompt() -> None:
    assert (
        choose(PODS, {"10.0.0.1:8080": 2, "10.0.0.2:8080": 0, "10.0.0.3:8080": 1}, key=None)
        == "10.0.0.2:8080"
    )
    # Equally busy pods take turns.
    assert [choose(PODS, {}, key=None, turn=t) for t in range(4)] == [*PODS, PODS[0]]
    assert choose([], {}, key=b"x") is None


def test_prefix_affinity_while_not_overloaded() -> None:
    key = b"system\nYou are a helpful assistant."
    target = preferred(PODS, key)
    assert choose(PODS, {}, key=key) == target
    assert choose(PODS, {target: AFFINITY_SLACK - 1}, key=key) == target  # a little busier: still it
    other = choose(PODS, {target: AFFINITY_SLACK}, key=key)
    assert other != target  # overloaded: the least busy pod instead
    # Without it (retried elsewhere, or gone), the same prompt has a stable second choice.
    rest = [p for p in PODS if p != target]
    assert choose(rest, {}, key=key) == preferred(rest, key)


def test_affinity_spreads_prompts_and_survives_a_pod_leaving() -> None:
    keys = [f"system prompt {i}".encode() for i in range(3000)]
    placement = {k: preferred(PODS, k) for k in keys}
    shares = Counter(placement.values())
    assert all(800 < n < 1200 for n in shares.values()), shares
    gone = PODS[0]
    moved = [k for k in keys if placement[k] != gone and preferred(PODS[1:], k) != placement[k]]
    assert moved == []  # only the removed pod's prompts move


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("https://api.openai.com", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions"),
        ("https://api.openai.com/v1", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions"),
        ("http://litellm:4000/", "/v1/embeddings", "http://litellm:4000/v1/embeddings"),
        (
            "https://gw.example.com/openai/v1/",
            "/v1/completions",
            "https://gw.example.com/openai/v1/completions",
        ),
        ("https://gw.example.com/api", "/v1/models", "https://gw.example.com/api/v1/models"),
    ],
)
def test_upstream_urls(base: str, path: str, url: str) -> None:
    assert upstream_url(base, path) == url


def test_auth_headers() -> None:
    assert auth_headers("openai", "sk-1") == {"Authorization": "Bearer sk-1"}
    assert auth_headers("litellm", "mk") == {"Authorization": "Bearer mk"}
    assert auth_headers("anthropic", "ak") == {"x-api-key": "ak", "anthropic-version": "2023-06-01"}
    assert auth_headers("openai", None) == {} and auth_headers("anthropic", "") == {}


def test_error_bodies_and_headers() -> None:
    limited = Refused(429, "budget used up", "rate_limit_error", "budget_exceeded", retry_after=0.2)
    assert limited.headers()["Retry-After"] == "1"
    assert Refused(429, "x", retry_after=41.0).headers()["Retry-After"] == "41"
    assert Refused(401, "no key", "authentication_error").headers()["WWW-Authenticate"].startswith("Bearer")
    missing = not_found("/v2/x")
    assert missing.status == 404 and "/v2/x" in json.loads(missing.body())["error"]["message"]


def test_audit_line_has_every_key_and_no_body_unless_asked() -> None:
    record = AuditRecord(
        "r",
        "ns",
        "id-1",
        "/v1/chat/completions",
        model="m",
        rule="pii",
        backend="a",
        status=200,
        outcome="ok",
        usage=Usage(3, 4),
        cost_usd=0.001,
        latency_ms=12.3456,
        ttft_ms=3.21,
        body={"secret": "x"},
    )
    entry = orjson.loads(audit_line(record))
    assert entry["msg"] == "router.request" and entry["router"] == "r" and entry["rule"] == "pii"
    assert (entry["prompt_tokens"], entry["completion_tokens"], entry["tokens_estimated"]) == (3, 4, False)
    assert entry["latency_ms"] == 12.346 and entry["ttft_ms"] == 3.21 and entry["cost_usd"] == 0.001
    assert "body" not in entry and entry["ts"].endswith("Z")
    assert orjson.loads(audit_line(record, include_body=True))["body"] == {"secret": "x"}
    empty = orjson.loads(audit_line(AuditRecord("r", "ns", "id-2", "/v1/models")))
    assert empty["prompt_tokens"] is None and empty["backend"] is None
    assert set(empty) == set(entry)
