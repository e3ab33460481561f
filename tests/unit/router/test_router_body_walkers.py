"""Every walk of a request body, as a class: what parsing one costs is bounded before it is parsed
(parse_cost is an upper bound of what orjson keeps, for every shape that amplifies), and each
walker (the detector, prompt_text and the affinity key, the audit line, the rewritten upstream body,
the usage readers) takes any body that parsing admits, deep or wide, without recursion or error."""

import gc
import time
import tracemalloc
from typing import Any

import orjson
import pytest

from llmkube.plan.router.audit import AuditRecord, audit_line
from llmkube.plan.router.bodies import MAX_DEPTH, depth_over, parse_cost
from llmkube.plan.router.detector import detect
from llmkube.plan.router.errors import Refused
from llmkube.plan.router.requests import ParsedRequest, parse_request, upstream_body
from llmkube.plan.router.usage import StreamUsage, usage_of_body

SIZE = 1 << 20


def _fill(unit: bytes) -> bytes:
    return b"[" + b",".join([unit] * (SIZE // (len(unit) + 1))) + b"]"


SHAPES = {
    "lists": _fill(b"[]"),
    "dicts": _fill(b"{}"),
    "members": _fill(b'{"a":[]}'),
    "nesting": _fill(b"[[[]]]"),
    "short strings": _fill(b'"a"'),
    "two-letter strings": _fill(b'"ab"'),
    "numbers": _fill(b"1000"),
    "floats": _fill(b"1.5"),
    "wide object": b"{" + b",".join(b'"%x":0' % i for i in range(SIZE // 9)) + b"}",
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_parse_cost_bounds_what_parsing_keeps_for_every_shape(shape: str) -> None:
    raw = SHAPES[shape]
    gc.collect()
    tracemalloc.start()
    try:
        value = orjson.loads(raw)
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del value
    assert kept <= parse_cost(raw), (shape, kept / len(raw), parse_cost(raw) / len(raw))


def _deep(depth: int, leaf: Any = "x") -> Any:
    """`depth` lists, one inside the other, around `leaf`."""
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def test_depth_is_found_without_recursion() -> None:
    assert not depth_over(_deep(MAX_DEPTH)) and depth_over(_deep(MAX_DEPTH + 1))
    assert depth_over(_deep(100_000))  # far beyond the interpreter's recursion limit
    assert not depth_over({"a": [{"b": 1}] * 10_000})


HOSTILE: dict[str, Any] = {
    "deep role": {"model": "m", "messages": [{"role": _deep(MAX_DEPTH - 3), "content": "hi"}]},
    "deep content": {"model": "m", "messages": [{"role": "user", "content": _deep(MAX_DEPTH - 3)}]},
    "deep parts": {"model": "m", "messages": [{"role": "user", "content": [{"text": _deep(MAX_DEPTH - 5)}]}]},
    "deep tools": {"model": "m", "messages": [], "tools": _deep(MAX_DEPTH - 1)},
    "wide messages": {"model": "m", "messages": [{"role": "user", "content": "a@b.co 4111 1111"}] * 50_000},
    "messages not a list": {"model": "m", "messages": {"role": "user"}},
    "prompt deep": {"model": "m", "prompt": _deep(MAX_DEPTH - 1)},
    "input wide": {"model": "m", "input": [[1] * 1000] * 100},
}


@pytest.mark.parametrize("name", list(HOSTILE))
@pytest.mark.parametrize("endpoint", ["chat", "completions", "embeddings"])
def test_every_walker_takes_any_body_parsing_admits(name: str, endpoint: str) -> None:
    raw = orjson.dumps(HOSTILE[name])
    # CPU time, not the wall clock: a walk that went quadratic takes minutes, and a busy machine
    # (other processes on the cores) must not fail a linear one.
    started = time.process_time()
    parsed = parse_request(raw, endpoint)  # type: ignore[arg-type]
    assert isinstance(parsed, ParsedRequest), parsed
    parsed.prompt_text()
    parsed.affinity_key(256)
    detect(parsed.body)
    audit_line(AuditRecord("r", "ns", "id", "/", body=parsed.body), include_body=True)
    upstream_body(ParsedRequest(endpoint, parsed.body, "m", True, False), raw, model="other")  # type: ignore[arg-type]
    assert time.process_time() - started < 2.0


def test_bodies_deeper_than_the_limit_are_refused_whole() -> None:
    raw = b'{"model":"m","messages":' + b"[" * 1000 + b"]" * 1000 + b"}"
    refused = parse_request(raw, "chat")
    assert isinstance(refused, Refused) and refused.status == 400 and "deeper than 128" in refused.message


def test_the_usage_readers_read_only_the_usage_of_an_answer() -> None:
    vectors = b'{"data":[' + b",".join([b'{"embedding":[' + b",".join([b"0.5"] * 4096) + b"]}"] * 200) + b"]"
    answer = vectors + b',"usage":{"prompt_tokens":7,"total_tokens":7}}'
    started = time.process_time()
    usage = usage_of_body(answer)
    assert usage is not None and usage.prompt == 7
    assert time.process_time() - started < 0.05  # the answer (3 MiB) is not parsed
    hostile = b'{"usage":' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert usage_of_body(hostile) is None
    assert usage_of_body(b'{"usage":{' + b'"a":1,' * 100_000 + b"}}") is None  # larger than a usage
    follower = StreamUsage(strip_injected=True)
    follower.feed(b'data: {"usage":' + b"[" * 5000 + b"]" * 5000 + b"}\n\n")
    assert follower.usage is None
