"""Budgets: tokens and USD over rolling windows, per scope (the router, a rule, a team).

A request is admitted with a reservation (`reserve`): an estimate of what it will use (its prompt,
and `max_tokens` or `DEFAULT_COMPLETION_RESERVE` of answer), held against every budget that applies
to it until the request ends, when it is settled to what the request really used (`settle`: the
backend's count, or what was delivered before the client left). A request is refused (429) while a
budget that applies to it is used up counting what is held: `used + held >= max`. So requests in
flight together take a budget past its cap by at most the last reservation admitted (plus what a
request used beyond its own estimate), and the next one is refused. `Retry-After` is the time until
enough of the window's oldest use has aged out (or, when only reservations fill it, a second).
Usage is counted in buckets (at most 120 per window, at least a second wide), so memory does not
grow with traffic.

A team is the identity of the client's API key when keys are on (its `team`, else its name: a team
header cannot name a fresh budget), else the value of a request header; a request without it counts
as the team "" (leaving the header out does not escape a team budget). Teams are held at most
`max_teams` per budget: beyond that, new teams share one overflow counter, so a flood of invented
team names cannot grow memory. The counters live in this process: each router replica counts its
own traffic (docs/router.md).

Pure state with explicit time: every call says `now` (monotonic seconds)."""

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmkube.plan.router.config import Budget

OVERFLOW_TEAM = "\x00overflow"
_MAX_BUCKETS = 120
#: tokens of answer reserved for a request that sets no max_tokens
DEFAULT_COMPLETION_RESERVE = 256


@dataclass(frozen=True)
class Refusal:
    budget: str
    retry_after: float
    message: str


@dataclass(frozen=True)
class Reservation:
    """What one request holds of the budgets that apply to it, from admission to its settling."""

    #: (budget name, counter key) of each budget it is held against
    counters: tuple[tuple[str, str], ...]
    tokens: int
    usd: float


NO_RESERVATION = Reservation((), 0, 0.0)


def reservation_estimate(prompt_chars: int, max_tokens: int | None, *, answers: bool = True) -> int:
    """Tokens to reserve: the prompt at four characters a token, and the answer's cap (an embedding
    has no answer to count)."""
    prompt = math.ceil(prompt_chars / 4)
    if not answers:
        return prompt
    return prompt + (max_tokens if max_tokens is not None else DEFAULT_COMPLETION_RESERVE)


class _Window:
    """Sums over a rolling window, in buckets of `width` seconds."""

    __slots__ = ("_buckets", "tokens", "usd", "width", "window")

    def __init__(self, window: float) -> None:
        self.window = window
        self.width = max(1.0, window / _MAX_BUCKETS)
        #: (bucket start, tokens, usd), oldest first
        self._buckets: deque[list[float]] = deque()
        self.tokens = 0.0
        self.usd = 0.0

    def _expire(self, now: float) -> None:
        while self._buckets and self._buckets[0][0] + self.width <= now - self.window:
            _, tokens, usd = self._buckets.popleft()
            self.tokens -= tokens
            self.usd -= usd
        if not self._buckets:
            self.tokens = self.usd = 0.0  # no float dust left behind

    def add(self, tokens: float, usd: float, now: float) -> None:
        self._expire(now)
        start = math.floor(now / self.width) * self.width
        if self._buckets and self._buckets[-1][0] == start:
            self._buckets[-1][1] += tokens
            self._buckets[-1][2] += usd
        else:
            self._buckets.append([start, tokens, usd])
        self.tokens += tokens
        self.usd += usd

    def used(self, now: float) -> tuple[float, float]:
        self._expire(now)
        return self.tokens, self.usd

    def empty(self, now: float) -> bool:
        self._expire(now)
        return not self._buckets

    def free_after(self, now: float, *, tokens_over: float | None, usd_over: float | None) -> float:
        """Seconds until the window's sums fall below the caps (None: that cap does not bind)."""
        self._expire(now)
        tokens, usd = self.tokens, self.usd
        for start, bucket_tokens, bucket_usd in self._buckets:
            tokens -= bucket_tokens
            usd -= bucket_usd
            if (tokens_over is None or tokens < tokens_over) and (usd_over is None or usd < usd_over):
                return max(0.0, start + self.width + self.window - now)
        return self.window


def scope_key(
    budget: Budget, *, rule: str | None, headers: Mapping[str, str], identity: str | None = None
) -> str | None:
    """The counter a request uses under `budget`, or None when the budget does not apply. A team is
    the client key's `identity` when there is one, and only then the header."""
    if budget.scope == "router":
        return ""
    if budget.scope == "rule":
        return "" if rule is not None and rule == budget.rule_name else None
    if identity is not None:
        return identity
    return headers.get(budget.header_key, "")


class Budgets:
    def __init__(self, budgets: Sequence[Budget] = (), *, max_teams: int = 10_000) -> None:
        self.max_teams = max_teams
        self._budgets: dict[str, Budget] = {}
        self._windows: dict[str, dict[str, _Window]] = {}
        #: (budget, key) -> [tokens, usd] reserved by requests in flight
        self._held: dict[tuple[str, str], list[float]] = {}
        self.reconfigure(budgets)

    def reconfigure(self, budgets: Sequence[Budget]) -> None:
        """A new spec: counters of budgets that kept their name, scope and window are kept."""
        kept: dict[str, dict[str, _Window]] = {}
        for budget in budgets:
            old = self._budgets.get(budget.name)
            if old is not None and (old.scope, old.window, old.rule_name, old.header_key) == (
                budget.scope,
                budget.window,
                budget.rule_name,
                budget.header_key,
            ):
                kept[budget.name] = self._windows.get(budget.name, {})
            else:
                kept[budget.name] = {}
        self._budgets = {b.name: b for b in budgets}
        self._windows = kept

    @property
    def budgets(self) -> list[Budget]:
        return list(self._budgets.values())

    def applicable(
        self, *, rule: str | None, headers: Mapping[str, str], identity: str | None = None
    ) -> list[tuple[Budget, str]]:
        found = []
        for budget in self._budgets.values():
            key = scope_key(budget, rule=rule, headers=headers, identity=identity)
            if key is not None:
                found.append((budget, key))
        return found

    def _existing(self, budget: Budget, key: str) -> _Window | None:
        windows = self._windows.get(budget.name, {})
        window = windows.get(key)
        if window is None and budget.scope == "team" and len(windows) >= self.max_teams:
            window = windows.get(OVERFLOW_TEAM)
        return window

    def _create(self, budget: Budget, key: str, now: float) -> _Window:
        windows = self._windows.setdefault(budget.name, {})
        window = windows.get(key)
        if window is not None:
            return window
        if budget.scope == "team" and len(windows) >= self.max_teams:
            for stale in [k for k, w in windows.items() if w.empty(now)]:
                del windows[stale]
            if len(windows) >= self.max_teams:
                key = OVERFLOW_TEAM
        return windows.setdefault(key, _Window(budget.window))

    def _counter(self, budget: Budget, key: str) -> str:
        """The key a request's use is counted under (the overflow team once teams are full)."""
        if budget.scope != "team":
            return key
        windows = self._windows.get(budget.name, {})
        if key in windows or len(windows) < self.max_teams or (budget.name, key) in self._held:
            return key
        return OVERFLOW_TEAM

    def _used(self, budget: Budget, key: str, now: float) -> tuple[float, float, _Window | None]:
        window = self._existing(budget, key)
        tokens, usd = window.used(now) if window is not None else (0.0, 0.0)
        held = self._held.get((budget.name, self._counter(budget, key)))
        if held is not None:
            tokens, usd = tokens + held[0], usd + held[1]
        return tokens, usd, window

    def check(self, applicable: Sequence[tuple[Budget, str]], now: float) -> Refusal | None:
        """The first budget that is used up (counting what requests in flight hold of it), with when
        it frees; None when every one has room."""
        for budget, key in applicable:
            tokens, usd, window = self._used(budget, key, now)
            over_tokens = budget.max_tokens is not None and tokens >= budget.max_tokens
            over_usd = budget.max_usd is not None and usd >= budget.max_usd
            if over_tokens or over_usd:
                wait = (
                    window.free_after(
                        now,
                        tokens_over=budget.max_tokens if over_tokens else None,
                        usd_over=budget.max_usd if over_usd else None,
                    )
                    if window is not None
                    else 1.0  # only reservations fill it: they settle as their requests end
                )
                used = (
                    f"{tokens:.0f} of {budget.max_tokens} tokens"
                    if over_tokens
                    else (f"${usd:.4f} of ${budget.max_usd:g}")
                )
                who = f' for team "{key}"' if budget.scope == "team" and key != OVERFLOW_TEAM else ""
                return Refusal(
                    budget.name,
                    wait,
                    f'budget "{budget.name}"{who} is used up: {used} in the last {budget.window:g}s',
                )
        return None

    def reserve(
        self, applicable: Sequence[tuple[Budget, str]], tokens: int, usd: float, now: float
    ) -> Reservation | Refusal:
        """Admit a request expected to use `tokens` and `usd`: the refusal of the first budget used up,
        else what it now holds of every budget (give it back with `settle`)."""
        refused = self.check(applicable, now)
        if refused is not None:
            return refused
        return self.hold(applicable, tokens, usd)

    def hold(self, applicable: Sequence[tuple[Budget, str]], tokens: int, usd: float) -> Reservation:
        """Hold `tokens` and `usd` against every budget of a request that `check` admitted."""
        counters = []
        for budget, key in applicable:
            counter = (budget.name, self._counter(budget, key))
            held = self._held.setdefault(counter, [0.0, 0.0])
            held[0] += tokens
            held[1] += usd
            counters.append(counter)
        return Reservation(tuple(counters), tokens, usd)

    def settle(self, reservation: Reservation, tokens: int, usd: float, now: float) -> None:
        """A request is over: what it held is given back and what it used is counted."""
        for counter in reservation.counters:
            held = self._held.get(counter)
            if held is None:
                continue  # its budget changed meanwhile
            held[0] -= reservation.tokens
            held[1] -= reservation.usd
            if held[0] <= 0 and held[1] <= 1e-12:
                del self._held[counter]
        if tokens <= 0 and usd <= 0:
            return
        for name, key in reservation.counters:
            budget = self._budgets.get(name)
            if budget is not None:
                self._create(budget, key, now).add(tokens, usd, now)

    def held(self, budget: str, key: str = "") -> tuple[float, float]:
        """(tokens, USD) that requests in flight hold of one counter."""
        held = self._held.get((budget, key))
        return (held[0], held[1]) if held is not None else (0.0, 0.0)

    def record(self, applicable: Sequence[tuple[Budget, str]], tokens: int, usd: float, now: float) -> None:
        """Use with no reservation (a shadow's copy)."""
        if tokens <= 0 and usd <= 0:
            return
        for budget, key in applicable:
            self._create(budget, key, now).add(tokens, usd, now)

    def remaining(self, budget: Budget, now: float, key: str = "") -> tuple[float | None, float | None]:
        """(tokens, USD) left in the window for one counter, less what requests in flight hold of
        it; None where there is no such cap."""
        tokens, usd, _ = self._used(budget, key, now)
        return (
            max(0.0, budget.max_tokens - tokens) if budget.max_tokens is not None else None,
            max(0.0, budget.max_usd - usd) if budget.max_usd is not None else None,
        )

    def teams(self, budget: str) -> int:
        return len(self._windows.get(budget, {}))
