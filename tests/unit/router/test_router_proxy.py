"""The router's proxy end to end on loopback: real HTTP clients (aiohttp, curl) in front, real
OpenAI-compatible servers (llmkube_testing.openai_upstream) behind, over real sockets. Rules,
strategies, fallback, fail-closed, shadows, budgets, bad input, client keys, providers' auth."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from llmkube_testing.openai_upstream import Upstream
from prometheus_client import REGISTRY

from tests.unit.router.proxy_support import RunningProxy, post, running_proxy

CHAT = "/v1/chat/completions"


def _chat(model: str, text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def _local(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inferenceServiceRef": {"name": name}, **extra}


def _rule(name: str, *backends: str, models: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    route: dict[str, Any] = {"backends": list(backends)}
    if "strategy" in extra:
        route["strategy"] = extra.pop("strategy")
    found: dict[str, Any] = {"name": name, "route": route, **extra}
    if models is not None:
        found.setdefault("match", {})["models"] = models
    return found


async def _eventually(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


def _audit(running: RunningProxy) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in running.audit_lines]


def _outbound_address() -> str | None:
    """An address of this machine that is not loopback (external backends may not be loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a source address
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@pytest.fixture
async def upstreams() -> AsyncIterator[Callable[..., Any]]:
    started: list[Upstream] = []

    async def start(name: str, **options: Any) -> Upstream:
        upstream = await Upstream(name=name, **options).start()
        started.append(upstream)
        return upstream

    yield start
    for upstream in started:
        await upstream.stop()


def _two_models(**rule_extra: Any) -> dict[str, Any]:
    return {
        "backends": [_local("small"), _local("large")],
        "rules": [
            _rule("small-models", "small", models=["tiny-*"], **rule_extra),
            _rule("large-models", "large", models=["big-model"]),
        ],
    }


async def test_rules_by_model_route_non_streaming_answers_to_their_backend(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    small, large = await upstreams("small"), await upstreams("large")
    async with running_proxy("by-model", tmp_path) as running:
        running.load({**_two_models(), "defaultRoute": "large"})
        running.endpoints("small", f"127.0.0.1:{small.port}")
        running.endpoints("large", f"127.0.0.1:{large.port}")

        status, headers, body = await post(session, running.url + CHAT, _chat("tiny-llama"))
        assert status == 200 and headers["X-Upstream"] == "small"
        assert headers["X-Llmkube-Backend"] == "small" and headers["X-Llmkube-Rule"] == "small-models"
        answer = orjson.loads(body)
        assert answer["object"] == "chat.completion" and answer["model"] == "tiny-llama"

        status, headers, _ = await post(session, running.url + CHAT, _chat("big-model"))
        assert status == 200 and headers["X-Upstream"] == "large"
        status, headers, _ = await post(session, running.url + CHAT, _chat("anything-else"))
        assert status == 200 and headers["X-Llmkube-Rule"] == "default"

        for path, body_in in (
            ("/v1/completions", {"model": "tiny-x", "prompt": "once"}),
            ("/v1/embeddings", {"model": "tiny-x", "input": "text"}),
        ):
            status, headers, body = await post(session, running.url + path, body_in)
            assert status == 200 and headers["X-Upstream"] == "small", path
        assert orjson.loads(body)["object"] == "list"
        # What went upstream is the very body the client sent (no model to rewrite, no stream).
        assert small.seen[0].body == _chat("tiny-llama") and small.seen[0].path == CHAT

        lines = _audit(running)
        assert [(line["rule"], line["backend"], line["status"]) for line in lines[:3]] == [
            ("small-models", "small", 200),
            ("large-models", "large", 200),
            ("default", "large", 200),
        ]
        assert lines[0]["prompt_tokens"] == 10 and lines[0]["completion_tokens"] == 8
        assert lines[0]["latency_ms"] > 0 and lines[0]["ttft_ms"] is not None


async def test_a_stream_is_relayed_chunk_by_chunk_and_a_client_that_leaves_cancels_the_upstream(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    slow = await upstreams("small", tokens=50, interval=0.1)
    async with running_proxy("streaming", tmp_path) as running:
        running.load({"backends": [_local("small")], "defaultRoute": "small"})
        running.endpoints("small", f"127.0.0.1:{slow.port}")
        async with session.post(running.url + CHAT, json=_chat("m", stream=True)) as answer:
            assert answer.status == 200 and answer.content_type == "text/event-stream"
            first = await answer.content.readline()
            assert first.startswith(b"data: ") and b"t0 " in first
            # The first event arrived while the backend is still generating: nothing was buffered.
            assert slow.in_flight == 1 and slow.cancelled == 0
        # The client closed its connection mid-stream: the backend's request is cancelled.
        await _eventually(lambda: slow.cancelled == 1 and slow.in_flight == 0, within=3.0)
        await _eventually(lambda: len(running.audit_lines) == 1)
        line = _audit(running)[0]
        assert line["status"] == 499 and line["outcome"] == "client_gone"


async def test_a_whole_stream_counts_its_usage_chunk_that_the_router_asked_for_and_hid(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    small = await upstreams("small", tokens=5)
    async with running_proxy("usage", tmp_path) as running:
        running.load({"backends": [_local("small")], "defaultRoute": "small"})
        running.endpoints("small", f"127.0.0.1:{small.port}")
        async with session.post(running.url + CHAT, json=_chat("m", stream=True)) as answer:
            events = [line async for line in answer.content if line.strip()]
        assert events[-1] == b"data: [DONE]\n"
        assert b"usage" not in b"".join(events)  # the client did not ask for it
        assert small.seen[0].body["stream_options"] == {"include_usage": True}
        line = _audit(running)[0]
        assert (line["prompt_tokens"], line["completion_tokens"], line["tokens_estimated"]) == (10, 5, False)

        # A client that asks for the usage chunk gets it.
        asked = _chat("m", stream=True, stream_options={"include_usage": True})
        async with session.post(running.url + CHAT, json=asked) as answer:
            events = [line async for line in answer.content if line.strip()]
        assert any(b'"usage"' in event for event in events)


async def test_a_backends_cookie_is_neither_kept_nor_sent_with_another_clients_request(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    """The router's connections are shared by every client: a cookie one answer set must not ride
    along with the next request (whoever sent it), nor reach the client."""
    backend = await upstreams("m", set_cookie="session=of-the-first-client; Path=/")
    async with running_proxy("no-cookies", tmp_path) as running:
        running.load({"backends": [_local("m")], "defaultRoute": "m"})
        # By name, as a provider is (a cookie jar would keep no cookie of an IP address, a pod's).
        running.endpoints("m", f"localhost:{backend.port}")
        for stream in (False, True, False):
            async with session.post(running.url + CHAT, json=_chat("m", stream=stream)) as answer:
                assert answer.status == 200 and "Set-Cookie" not in answer.headers
                await answer.read()
        assert len(backend.seen) == 3
        assert [seen.headers.get("Cookie") for seen in backend.seen] == [None, None, None]


async def test_curl_streams_and_posts_through_the_router(tmp_path: Path, upstreams: Any) -> None:
    small = await upstreams("small", tokens=3)
    async with running_proxy("curl", tmp_path) as running:
        running.load({"backends": [_local("small")], "defaultRoute": "small"})
        running.endpoints("small", f"127.0.0.1:{small.port}")
        for stream in (True, False):
            curl = await asyncio.create_subprocess_exec(
                "curl", "-sS", "-N", "-H", "Content-Type: application/json",
                "-d", orjson.dumps(_chat("m", stream=stream)).decode(), running.url + CHAT,
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, _ = await curl.communicate()
            assert curl.returncode == 0
            if stream:
                assert out.count(b"data: ") == 3 + 2 and out.endswith(b"data: [DONE]\n\n")
            else:
                assert orjson.loads(out)["choices"][0]["message"]["content"] == "t0 t1 t2"


@pytest.mark.parametrize("failure", ["error", "hang", "connect"])
async def test_primary_fallback_goes_on_after_a_failure_before_the_first_byte(
    failure: str, tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    primary = await upstreams("primary", behaviour="error" if failure == "error" else "hang")
    fallback = await upstreams("fallback")
    async with running_proxy(f"fallback-{failure}", tmp_path) as running:
        running.load(
            {
                "backends": [_local("primary"), _local("fallback")],
                "rules": [_rule("all", "primary", "fallback", models=["*"], timeout="300ms")],
                "proxy": {"quarantineDuration": "1h"},
            }
        )
        if failure == "connect":
            with socket.socket() as closed:
                closed.bind(("127.0.0.1", 0))
                port = closed.getsockname()[1]
        else:
            port = primary.port
        running.endpoints("primary", f"127.0.0.1:{port}")
        running.endpoints("fallback", f"127.0.0.1:{fallback.port}")
        started = time.monotonic()
        status, headers, _ = await post(session, running.url + CHAT, _chat("m"))
        assert status == 200 and headers["X-Upstream"] == "fallback"
        if failure == "hang":  # the rule's timeout (300ms), not the router's default (120s)
            assert time.monotonic() - started < 5
        tried = primary.requests
        # The primary is in quarantine now: the next request goes straight to the fallback.
        status, headers, _ = await post(session, running.url + CHAT, _chat("m"))
        assert status == 200 and headers["X-Upstream"] == "fallback"
        assert primary.requests == tried
        lines = _audit(running)
        assert lines[0]["tried"] == ["primary", "fallback"] and lines[1]["tried"] == ["fallback"]


async def test_every_backend_failing_answers_502_or_504_naming_what_happened(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    broken, hanging = await upstreams("broken", behaviour="error"), await upstreams("hang", behaviour="hang")
    async with running_proxy("all-fail", tmp_path) as running:
        running.load(
            {
                "backends": [_local("broken"), _local("hang", timeout="200ms")],
                "rules": [_rule("a", "broken", models=["a"]), _rule("h", "hang", models=["h"])],
            }
        )
        running.endpoints("broken", f"127.0.0.1:{broken.port}")
        running.endpoints("hang", f"127.0.0.1:{hanging.port}")
        status, _, body = await post(session, running.url + CHAT, _chat("a"))
        error = orjson.loads(body)["error"]
        assert status == 502 and error["code"] == "upstream_failed" and "500" in error["message"]
        status, _, body = await post(session, running.url + CHAT, _chat("h"))
        assert status == 504 and orjson.loads(body)["error"]["code"] == "upstream_timeout"


async def test_a_stream_reset_after_its_first_byte_is_cut_off_not_retried(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    resetting = await upstreams("resetting", behaviour="reset", reset_after=2, tokens=10)
    fallback = await upstreams("fallback")
    async with running_proxy("reset", tmp_path) as running:
        running.load(
            {
                "backends": [_local("resetting"), _local("fallback")],
                "rules": [_rule("all", "resetting", "fallback", models=["*"])],
            }
        )
        running.endpoints("resetting", f"127.0.0.1:{resetting.port}")
        running.endpoints("fallback", f"127.0.0.1:{fallback.port}")
        received: list[bytes] = []
        with pytest.raises(aiohttp.ClientPayloadError):
            async with session.post(running.url + CHAT, json=_chat("m", stream=True)) as answer:
                assert answer.status == 200
                async for line in answer.content:
                    received.append(line)
        assert any(b"t1 " in line for line in received) and b"[DONE]" not in b"".join(received)
        assert fallback.requests == 0  # the client had bytes: a second answer would corrupt it
        await _eventually(lambda: len(running.audit_lines) == 1)
        assert _audit(running)[0]["outcome"] == "upstream_reset"


async def test_fail_closed_answers_503_and_never_leaves_the_rule(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    private, other = await upstreams("private", behaviour="error"), await upstreams("other")
    async with running_proxy("fail-closed", tmp_path) as running:
        running.load(
            {
                "backends": [_local("private"), _local("other")],
                "rules": [
                    {
                        "name": "sensitive",
                        "match": {"dataClassification": ["pii"]},
                        "route": {"backends": ["private"]},
                        "failClosed": True,
                    }
                ],
                "defaultRoute": "other",
                "policy": {"classification": {"mode": "header-only"}},
            }
        )
        running.endpoints("private", f"127.0.0.1:{private.port}")
        running.endpoints("other", f"127.0.0.1:{other.port}")
        status, headers, body = await post(
            session, running.url + CHAT, _chat("m"), {"X-Llmkube-Classification": "PII"}
        )
        assert status == 503 and orjson.loads(body)["error"]["code"] == "fail_closed"
        assert "Retry-After" in headers and other.requests == 0
        # Unclassified requests go by the default route.
        status, headers, _ = await post(session, running.url + CHAT, _chat("m"))
        assert status == 200 and headers["X-Upstream"] == "other"


async def test_the_detector_classifies_personal_data_and_hybrid_trusts_a_header(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    private, public = await upstreams("private"), await upstreams("public")
    for mode in ("detector", "hybrid"):
        async with running_proxy(f"detect-{mode}", tmp_path) as running:
            running.load(
                {
                    "backends": [_local("private"), _local("public")],
                    "rules": [
                        {
                            "name": "pii",
                            "match": {"dataClassification": ["pii"]},
                            "route": {"backends": ["private"]},
                            "failClosed": True,
                        }
                    ],
                    "defaultRoute": "public",
                    "policy": {"classification": {"mode": mode}},
                }
            )
            running.endpoints("private", f"127.0.0.1:{private.port}")
            running.endpoints("public", f"127.0.0.1:{public.port}")
            text = "write to jane.doe@example.com, card 4111 1111 1111 1111"
            status, headers, _ = await post(session, running.url + CHAT, _chat("m", text))
            assert status == 200 and headers["X-Upstream"] == "private", mode
            status, headers, _ = await post(session, running.url + CHAT, _chat("m", "the weather"))
            assert headers["X-Upstream"] == "public", mode
            line = _audit(running)[0]
            assert line["classification"] == "pii" and "email" in line["detected"], line
            if mode == "hybrid":  # a header, when sent, is taken as the classification
                status, headers, _ = await post(
                    session,
                    running.url + CHAT,
                    _chat("m", "the weather"),
                    {"X-Llmkube-Classification": "pii"},
                )
                assert headers["X-Upstream"] == "private"


async def test_a_shadow_gets_a_copy_and_a_hanging_shadow_never_slows_the_primary(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    primary, copy, stuck = (
        await upstreams("primary"),
        await upstreams("copy"),
        await upstreams("stuck", behaviour="hang"),
    )
    async with running_proxy("shadow", tmp_path) as running:
        running.load(
            {
                "backends": [_local("primary"), _local("copy"), _local("stuck")],
                "rules": [_rule("mirror", "primary", "copy", "stuck", models=["*"], strategy="shadow")],
            }
        )
        for upstream in (primary, copy, stuck):
            running.endpoints(upstream.name, f"127.0.0.1:{upstream.port}")
        started = time.monotonic()
        status, headers, _ = await post(session, running.url + CHAT, _chat("m", "mirror me"))
        assert status == 200 and headers["X-Upstream"] == "primary"
        assert time.monotonic() - started < 2  # the stuck shadow hangs for 120s
        await _eventually(lambda: copy.requests == 1 and stuck.in_flight == 1)
        assert copy.seen[0].body == primary.seen[0].body
        assert _audit(running)[0]["shadows"] == ["copy", "stuck"]


async def test_weighted_splits_1000_requests_within_ten_percent(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    heavy, light = await upstreams("heavy"), await upstreams("light")
    async with running_proxy("weighted", tmp_path) as running:
        running.load(
            {
                "backends": [_local("heavy", weight=75), _local("light", weight=25)],
                "rules": [_rule("split", "heavy", "light", models=["*"], strategy="weighted")],
            }
        )
        running.endpoints("heavy", f"127.0.0.1:{heavy.port}")
        running.endpoints("light", f"127.0.0.1:{light.port}")
        semaphore = asyncio.Semaphore(32)

        async def one() -> int:
            async with semaphore:
                status, _, _ = await post(session, running.url + CHAT, _chat("m"))
                return status

        statuses = await asyncio.gather(*(one() for _ in range(1000)))
        assert statuses == [200] * 1000
        assert heavy.requests + light.requests == 1000
        # Within the issue's ten per cent, and within the few requests the draws' sequence strays by.
        assert abs(heavy.requests - 750) <= 3 and abs(light.requests - 250) <= 3, (
            heavy.requests,
            light.requests,
        )


async def test_an_inference_service_is_balanced_across_its_pods_with_prefix_affinity(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    pods = [await upstreams(f"pod-{i}") for i in range(3)]
    async with running_proxy("balance", tmp_path) as running:
        running.load({"backends": [_local("svc")], "defaultRoute": "svc"})
        running.endpoints("svc", *(f"127.0.0.1:{pod.port}" for pod in pods))
        same = "You are a helpful assistant. " * 20
        served = set()
        for i in range(6):
            _, headers, _ = await post(session, running.url + CHAT, _chat("m", same + str(i)))
            served.add(headers["X-Upstream"])
        assert len(served) == 1  # one prompt prefix, one pod (its prompt cache is reused)
        for i in range(30):
            await post(session, running.url + CHAT, _chat("m", f"{i} different prompt"))
        assert all(pod.requests > 0 for pod in pods)  # different prompts spread


async def test_budgets_answer_429_with_retry_after_once_spent(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    small = await upstreams("small", tokens=8)  # 18 tokens per answer
    async with running_proxy("budget", tmp_path) as running:
        running.load(
            {
                "backends": [_local("small")],
                "defaultRoute": "small",
                "policy": {
                    "budgets": [
                        {"name": "hourly", "scope": "router", "windowSeconds": 3600, "maxTokens": 30},
                        {"name": "per-team", "scope": "team", "windowSeconds": 60, "maxTokens": 18},
                    ]
                },
            }
        )
        running.endpoints("small", f"127.0.0.1:{small.port}")
        team = {"X-Llmkube-Team": "blue"}
        assert (await post(session, running.url + CHAT, _chat("m"), team))[0] == 200
        status, headers, body = await post(session, running.url + CHAT, _chat("m"), team)
        assert status == 429 and int(headers["Retry-After"]) >= 1
        assert orjson.loads(body)["error"]["code"] == "budget_exceeded"
        assert _audit(running)[1]["budget"] == "per-team"
        other = {"X-Llmkube-Team": "red"}
        assert (await post(session, running.url + CHAT, _chat("m"), other))[0] == 200  # 36 > 30 now
        status, headers, _ = await post(session, running.url + CHAT, _chat("m"), {"X-Llmkube-Team": "green"})
        assert status == 429 and _audit(running)[-1]["budget"] == "hourly"
        assert small.requests == 2


@pytest.mark.parametrize(
    ("method", "path", "raw", "status", "code"),
    [
        ("POST", CHAT, b"{not json", 400, "invalid_json"),
        ("POST", CHAT, b'{"messages": []}', 400, "missing_model"),
        ("POST", CHAT, b"[]", 400, "invalid_body"),
        ("POST", CHAT, b'{"model": "m", "pad": "' + b"x" * 5000 + b'"}', 413, "request_too_large"),
        ("POST", "/v1/nowhere", b"{}", 404, None),
        ("GET", CHAT, b"", 405, None),
    ],
)
async def test_bad_requests_get_an_openai_error_and_the_router_keeps_serving(
    method: str,
    path: str,
    raw: bytes,
    status: int,
    code: str | None,
    tmp_path: Path,
    upstreams: Any,
    session: aiohttp.ClientSession,
) -> None:
    small = await upstreams("small")
    async with running_proxy("bad-input", tmp_path) as running:
        running.load(
            {"backends": [_local("small")], "defaultRoute": "small", "proxy": {"maxRequestBodyBytes": 4096}}
        )
        running.endpoints("small", f"127.0.0.1:{small.port}")
        async with session.request(
            method, running.url + path, data=raw, headers={"Content-Type": "application/json"}
        ) as answer:
            assert answer.status == status
            error = orjson.loads(await answer.read())["error"]
        assert set(error) >= {"message", "type", "code"} and error["message"]
        if code is not None:
            assert error["code"] == code
        assert small.requests == 0
        assert (await post(session, running.url + CHAT, _chat("m")))[0] == 200


async def test_client_keys_when_configured_are_required(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    small = await upstreams("small")
    keys = tmp_path / "api-keys" / "router-keys"
    keys.mkdir(parents=True)
    (keys / "team-a").write_text("sk-team-a-secret\n")
    async with running_proxy("keys", tmp_path) as running:
        running.load(
            {
                "backends": [_local("small")],
                "defaultRoute": "small",
                "policy": {"apiKeys": {"secretRef": {"name": "router-keys"}}},
            }
        )
        running.endpoints("small", f"127.0.0.1:{small.port}")
        status, _, body = await post(session, running.url + CHAT, _chat("m"))
        assert status == 401 and orjson.loads(body)["error"]["code"] == "invalid_api_key"
        status, _, _ = await post(session, running.url + CHAT, _chat("m"), {"Authorization": "Bearer wrong"})
        assert status == 401
        bearer = {"Authorization": "Bearer sk-team-a-secret"}
        status, _, _ = await post(session, running.url + CHAT, _chat("m"), bearer)
        assert status == 200 and "authorization" not in {k.lower() for k in small.seen[-1].headers}
        lines = _audit(running)
        assert lines[-1]["client"] == "team-a" and b"sk-team-a" not in b"".join(running.audit_lines)
        async with session.get(running.url + "/v1/models") as answer:
            assert answer.status == 401
        # Without a key, the body is not read: a client announcing 30 MB is refused from its head
        # (no 100-continue), and the connection ends with the answer.
        reader, writer = await asyncio.open_connection("127.0.0.1", int(running.url.rsplit(":", 1)[1]))
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
            b"Content-Length: 30000000\r\nExpect: 100-continue\r\n\r\n"
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 401 ") and b"Connection: close" in head
        writer.close()


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("openai", {"authorization": "Bearer sk-provider"}),
        ("litellm", {"authorization": "Bearer sk-provider"}),
        ("anthropic", {"x-api-key": "sk-provider", "anthropic-version": "2023-06-01"}),
    ],
)
async def test_external_providers_get_their_auth_header_and_their_model(
    provider: str, expected: dict[str, str], tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    address = _outbound_address()
    if address is None:
        pytest.skip("this machine has no address but loopback (external backends may not be loopback)")
    cloud = await upstreams("cloud", host=address)
    key = {"openai": "OPENAI_API_KEY", "litellm": "LITELLM_MASTER_KEY", "anthropic": "ANTHROPIC_API_KEY"}
    secret = tmp_path / "credentials" / "provider-keys"
    secret.mkdir(parents=True)
    (secret / key[provider]).write_text("sk-provider")
    # The admin lets keys go to this host (--router-external-hosts): it is not the provider's own.
    async with running_proxy(f"external-{provider}", tmp_path, external_hosts=address) as running:
        running.load(
            {
                "backends": [
                    {
                        "name": "cloud",
                        "external": {
                            "provider": provider,
                            "url": f"{cloud.url}/v1",
                            "model": "provider-model-1",
                            "credentialsSecretRef": {"name": "provider-keys"},
                        },
                    }
                ],
                "defaultRoute": "cloud",
            }
        )
        status, _, body = await post(
            session, running.url + CHAT, _chat("my-alias"), {"Authorization": "Bearer client-key"}
        )
        assert status == 200 and orjson.loads(body)["model"] == "provider-model-1"
        seen = cloud.seen[0]
        assert seen.path == CHAT and seen.body["model"] == "provider-model-1"
        sent = {name.lower(): value for name, value in seen.headers.items()}
        assert {name: sent.get(name) for name in expected} == expected
        line = _audit(running)[0]
        assert (line["model"], line["upstream_model"]) == ("my-alias", "provider-model-1")


async def test_an_external_backend_on_loopback_is_refused(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    inside = await upstreams("inside")
    async with running_proxy("egress", tmp_path) as running:
        running.load(
            {
                "backends": [{"name": "x", "external": {"provider": "openai", "url": inside.url}}],
                "defaultRoute": "x",
            }
        )
        status, _, body = await post(session, running.url + CHAT, _chat("m"))
        message = orjson.loads(body)["error"]["message"]
        assert status == 502 and "x: refused by the router's egress rules" in message
        assert "127.0.0.1" not in message and str(inside.port) not in message  # the log has it
        assert inside.requests == 0


async def test_models_health_and_metrics(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    small, large = await upstreams("small"), await upstreams("large")
    async with running_proxy("pages", tmp_path) as running:
        running.load({**_two_models(), "defaultRoute": "large"})
        running.endpoints("small", f"127.0.0.1:{small.port}")
        running.endpoints("large", f"127.0.0.1:{large.port}")
        async with session.get(running.url + "/v1/models") as answer:
            models = orjson.loads(await answer.read())
        assert models["object"] == "list"
        assert [m["id"] for m in models["data"]] == ["big-model", "large"]
        for path in ("/healthz", "/readyz"):
            async with session.get(running.url + path) as answer:
                assert answer.status == 200
        await post(session, running.url + CHAT, _chat("tiny-1"))
        await post(session, running.url + CHAT, {"model": 1})
        async with session.get(running.url + "/metrics") as answer:
            assert answer.status == 200
            await answer.read()
        labels = {"router": "pages", "rule": "small-models", "backend": "small", "code": "200"}
        assert REGISTRY.get_sample_value("llmkube_router_requests_total", labels) == 1
        none = {"router": "pages", "rule": "none", "backend": "", "code": "400"}
        assert REGISTRY.get_sample_value("llmkube_router_requests_total", none) == 1
        health = {"router": "pages", "backend": "small"}
        assert REGISTRY.get_sample_value("llmkube_router_backend_healthy", health) == 1
        assert REGISTRY.get_sample_value("llmkube_router_backend_endpoints", health) == 1
        tokens = {"router": "pages", "backend": "small", "kind": "completion"}
        assert REGISTRY.get_sample_value("llmkube_router_tokens_total", tokens) == 8


async def test_a_new_spec_takes_effect_without_a_restart_and_a_refused_one_keeps_the_last(
    tmp_path: Path, upstreams: Any, session: aiohttp.ClientSession
) -> None:
    small, large = await upstreams("small"), await upstreams("large")
    async with running_proxy("reload", tmp_path) as running:
        running.load({**_two_models(), "defaultRoute": "small"})
        running.endpoints("small", f"127.0.0.1:{small.port}")
        running.endpoints("large", f"127.0.0.1:{large.port}")
        assert (await post(session, running.url + CHAT, _chat("x")))[1]["X-Upstream"] == "small"
        running.load({**_two_models(), "defaultRoute": "large"}, generation=2)
        assert (await post(session, running.url + CHAT, _chat("x")))[1]["X-Upstream"] == "large"
        loaded = running.state.load(
            {"metadata": {"generation": 3}, "spec": {**_two_models(), "defaultRoute": "?"}}
        )
        assert loaded.refused
        assert (await post(session, running.url + CHAT, _chat("x")))[1]["X-Upstream"] == "large"
        running.state.gone()
        status, _, body = await post(session, running.url + CHAT, _chat("x"))
        assert status == 503 and "deleted" in orjson.loads(body)["error"]["message"]
