"""Budgets charge what was delivered whatever the client does, hold reservations so concurrent
requests cannot overshoot, and are keyed by the API key's identity when keys are on; a key's rules
and rate hold. The pure decisions (Budgets.reserve/settle, RateLimits, delivered) table-tested,
then the proxy that performs them against real upstreams on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from llmkube_testing.openai_upstream import Upstream

from llmkube.plan.router.budgets import Budgets, Refusal, Reservation, reservation_estimate
from llmkube.plan.router.config import Budget
from llmkube.plan.router.ratelimit import RateLimits
from llmkube.plan.router.usage import Usage, delivered
from tests.unit.router.proxy_support import post, running_proxy

CHAT = "/v1/chat/completions"


def _spec(*budgets: dict[str, Any], **policy: Any) -> dict[str, Any]:
    return {
        "backends": [{"name": "alpha", "inferenceServiceRef": {"name": "alpha"}}],
        "rules": [{"name": "premium", "match": {"models": ["big"]}, "route": {"backends": ["alpha"]}}],
        "defaultRoute": "alpha",
        "policy": {"budgets": list(budgets), **policy},
    }


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}


# -- the pure decisions ----------------------------------------------------------------------------


def test_reservations_hold_a_budget_until_settled_so_concurrent_admissions_stop_at_the_cap() -> None:
    budget = Budget("b", "router", 60.0, max_tokens=100)
    budgets = Budgets([budget])
    use = budgets.applicable(rule=None, headers={})
    admitted = [budgets.reserve(use, 40, 0.0, 0.0) for _ in range(5)]
    # 0 + 40 + 40 < 100, then 120 >= 100: two more than nothing, then refusals (the held count).
    assert [isinstance(r, Reservation) for r in admitted] == [True, True, True, False, False]
    assert budgets.held("b") == (120.0, 0.0) and budgets.remaining(budget, 0.0) == (0.0, None)
    refusal = admitted[3]
    assert isinstance(refusal, Refusal) and refusal.retry_after == 1.0  # only holds fill it
    first = admitted[0]
    assert isinstance(first, Reservation)
    budgets.settle(first, 10, 0.0, 1.0)  # it used less than it held
    assert budgets.held("b") == (80.0, 0.0) and budgets.remaining(budget, 1.0) == (10.0, None)
    for held in admitted[1:3]:
        assert isinstance(held, Reservation)
        budgets.settle(held, 45, 0.0, 2.0)
    assert budgets.held("b") == (0.0, 0.0) and budgets.remaining(budget, 2.0) == (0.0, None)
    # Overshoot: at most the last reservation admitted (and what a request used past its own).
    assert 100 <= 10 + 45 + 45 <= 100 + 40


@pytest.mark.parametrize(
    ("reported", "events", "reserved", "expected"),
    [
        (Usage(3, 4), 9, 50, Usage(3, 4)),  # the backend's count wins
        (None, 7, 50, Usage(3, 7, reported=False)),  # a stream: a token per event sent
        (None, None, 50, Usage(3, 47, reported=False)),  # an answer a backend worked on: all admitted
        (None, None, None, None),  # no backend had it
    ],
)
def test_what_a_client_that_left_is_charged(
    reported: Usage | None, events: int | None, reserved: int | None, expected: Usage | None
) -> None:
    assert delivered(reported, 12, events, reserved=reserved) == expected


def test_a_reservation_is_the_prompt_and_the_answers_cap() -> None:
    assert reservation_estimate(40, 100) == 110
    assert reservation_estimate(40, None) == 10 + 256
    assert reservation_estimate(40, 100, answers=False) == 10


def test_with_keys_a_team_is_the_keys_identity_and_headers_name_no_fresh_budget() -> None:
    budget = Budget("team", "team", 60.0, max_tokens=10)
    budgets = Budgets([budget])
    for header in ("a", "b", "c"):
        use = budgets.applicable(rule=None, headers={"x-llmkube-team": header}, identity="blue")
        assert use == [(budget, "blue")]
    assert budgets.applicable(rule=None, headers={"x-llmkube-team": "a"}) == [(budget, "a")]


def test_a_keys_rate_allows_a_minutes_worth_then_its_pace() -> None:
    rates = RateLimits()
    assert [rates.take("k", 3, 0.0) for _ in range(3)] == [None, None, None]
    wait = rates.take("k", 3, 0.0)
    assert wait == pytest.approx(20.0)
    assert rates.take("k", 3, 19.0) is not None and rates.take("k", 3, 20.5) is None
    assert rates.take("other", 3, 0.0) is None


# -- the proxy performing them -----------------------------------------------------------------------


@pytest.fixture
async def streaming() -> AsyncIterator[Upstream]:
    upstream = await Upstream(name="alpha", tokens=40, interval=0.01, usage=False).start()
    yield upstream
    await upstream.stop()


async def test_a_stream_the_client_leaves_is_charged_what_it_was_sent(
    tmp_path: Path, streaming: Upstream
) -> None:
    """Before: 10 streams x 40 tokens delivered and left before the end, a 30-token budget untouched."""
    async with running_proxy("leave", tmp_path) as running:
        running.load(_spec({"name": "cap", "scope": "router", "maxTokens": 30, "windowSeconds": 600}))
        running.endpoints("alpha", f"127.0.0.1:{streaming.port}")
        statuses = []
        async with aiohttp.ClientSession() as session:
            for _ in range(10):
                async with session.post(running.url + CHAT, json=_chat(stream=True)) as answer:
                    statuses.append(answer.status)
                    if answer.status == 200:
                        got = 0
                        async for _chunk in answer.content.iter_any():
                            got += 1
                            if got >= 5:
                                break  # and leave mid-way
                await asyncio.sleep(0.1)
        charged = [orjson.loads(line) for line in running.audit_lines if orjson.loads(line)["status"] == 499]
        assert charged and all(line["completion_tokens"] > 0 for line in charged), charged
        # What the streams that were served were sent spent the budget; then every one was refused.
        spent = sum(line["prompt_tokens"] + line["completion_tokens"] for line in charged)
        assert spent >= 30 and len(charged) == statuses.count(200) < 10, (spent, statuses)
        assert statuses[statuses.index(429) :] == [429] * (10 - statuses.index(429)), statuses
        assert running.state.budgets.held("cap") == (0.0, 0.0)


async def test_concurrent_requests_cannot_overshoot_beyond_their_reservations(tmp_path: Path) -> None:
    """Before: every one of 10 concurrent requests was admitted against a 100-token budget."""
    upstream = await Upstream(name="alpha", delay=0.5, tokens=8).start()
    try:
        async with running_proxy("together", tmp_path) as running:
            running.load(_spec({"name": "cap", "scope": "router", "maxTokens": 100, "windowSeconds": 600}))
            running.endpoints("alpha", f"127.0.0.1:{upstream.port}")
            async with aiohttp.ClientSession() as session:
                results = await asyncio.gather(
                    *(post(session, running.url + CHAT, _chat(max_tokens=40)) for _ in range(10))
                )
            statuses = sorted(status for status, _, _ in results)
            # Each reserves 1 + 40 tokens: 0, 41, 82 < 100 are admitted, 123 is not.
            assert statuses == [200] * 3 + [429] * 7, statuses
            assert upstream.requests == 3
            # Settled to what they used (10 + 8 each), nothing left held.
            assert running.state.budgets.held("cap") == (0.0, 0.0)
            left = running.state.budgets.remaining(running.state.budgets.budgets[0], running.state.clock())
            assert left == (100 - 3 * 18, None)
    finally:
        await upstream.stop()


async def test_api_keys_name_their_team_their_rules_and_their_rate(tmp_path: Path) -> None:
    upstream = await Upstream(name="alpha", tokens=8).start()
    keys = tmp_path / "api-keys" / "keys"
    keys.mkdir(parents=True)
    (keys / "alice").write_text("alice-key")
    (keys / "bob").write_text("bob-key")
    (keys / "carol").write_text("carol-key")
    try:
        async with running_proxy("keys", tmp_path) as running:
            running.load(
                _spec(
                    {"name": "teams", "scope": "team", "maxTokens": 30, "windowSeconds": 600},
                    apiKeys={
                        "secretRef": {"name": "keys"},
                        "clients": [
                            {"name": "alice", "team": "blue", "rules": ["default"]},
                            {"name": "bob", "team": "blue"},
                            {"name": "carol", "requestsPerMinute": 2},
                        ],
                    },
                )
            )
            running.endpoints("alpha", f"127.0.0.1:{upstream.port}")

            async def ask(key: str, team: str, model: str = "m") -> int:
                headers = {"Authorization": f"Bearer {key}", "x-llmkube-team": team}
                status, _, _ = await post(session, running.url + CHAT, {**_chat(), "model": model}, headers)
                return status

            async with aiohttp.ClientSession() as session:
                # alice and bob share team blue's 30 tokens (18 a request), whatever header they send.
                assert await ask("alice-key", "fresh-1") == 200
                assert await ask("bob-key", "fresh-2") == 200
                assert await ask("alice-key", "fresh-3") == 429
                assert await ask("bob-key", "") == 429
                # alice may use the default route only.
                assert await ask("alice-key", "x", model="big") == 403
                # carol (her own team) has a rate of 2 a minute.
                assert [await ask("carol-key", "t") for _ in range(3)] == [200, 200, 429]
            teams = [orjson.loads(line)["team"] for line in running.audit_lines]
            assert {team for team in teams if team is not None} == {"blue", "carol"}, teams
    finally:
        await upstream.stop()


@pytest.mark.parametrize(
    ("path", "body", "prompt", "completion"),
    [
        # "user\nhi" is 7 characters: 2 tokens, and the answer's cap of 40.
        (CHAT, _chat(max_tokens=40), 2, 40),
        # "once upon a time", 16 characters: 4 tokens, and the default cap when none is set.
        ("/v1/completions", {"model": "m", "prompt": "once upon a time"}, 4, 256),
        # Answers that are not generated text: the prompt alone ("some text to embed", 18: 5;
        # "q\na\nbc", 6: 2).
        ("/v1/embeddings", {"model": "m", "input": "some text to embed"}, 5, 0),
        ("/v1/rerank", {"model": "m", "query": "q", "documents": ["a", "bc"]}, 2, 0),
    ],
)
async def test_a_client_that_leaves_before_a_whole_answer_is_charged_what_it_was_admitted_for(
    tmp_path: Path, path: str, body: dict[str, Any], prompt: int, completion: int
) -> None:
    """Before: a client that hung up while the backend made a non-streamed answer was charged
    nothing (the backend's work was free, and a budget never ran out for clients that hang up)."""
    upstream = await Upstream(name="alpha", delay=5.0).start()
    try:
        async with running_proxy("hang-up", tmp_path) as running:
            running.load(_spec({"name": "cap", "scope": "router", "maxTokens": 1000, "windowSeconds": 600}))
            running.endpoints("alpha", f"127.0.0.1:{upstream.port}")
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.5)) as session:
                with pytest.raises(TimeoutError):
                    await post(session, running.url + path, body)  # and it hangs up
            for _ in range(50):
                if running.audit_lines and upstream.in_flight == 0:
                    break
                await asyncio.sleep(0.1)
            assert upstream.requests == 1 and upstream.in_flight == 0  # the backend was let go
            line = orjson.loads(running.audit_lines[-1])
            assert (line["status"], line["outcome"], line["tried"]) == (499, "client_gone", ["alpha"])
            used = (line["prompt_tokens"], line["completion_tokens"], line["tokens_estimated"])
            assert used == (prompt, completion, True)
            budgets = running.state.budgets
            assert budgets.held("cap") == (0.0, 0.0)
            left = budgets.remaining(budgets.budgets[0], running.state.clock())
            assert left == (1000 - prompt - completion, None)  # spent, not only held
    finally:
        await upstream.stop()
