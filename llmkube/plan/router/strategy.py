"""The backends a matched request tries, in order, and the ones that get a copy of it.

* primary-fallback: the route's order; the next backend after a connect error, a 5xx or a header
  timeout (never once the client got a byte). With `latencySLOMs`, while the first backend's rolling
  p95 time to first byte is above it, the first backend within it (or not measured yet) goes first.
* weighted: one backend drawn by weight (weight 0: never drawn), then the others in route order as
  fallbacks. The draws of a rule are a low-discrepancy sequence (`next_draw`), not independent random
  numbers: over any run of requests each backend's share is its weight's to within a few requests
  (independent draws stray by their binomial spread: 75/25 over 1,000 requests by ±14 at one
  standard deviation), and the order still looks random, so no backend gets bursts.
* shadow: the first backend answers; the others get copies whose answers are discarded.

Only usable backends are tried (an InferenceService with a ready endpoint not in quarantine, an
external backend not in quarantine or due for its half-open probe); `requiredCapabilities` narrows
the route to the backends that have them all.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from llmkube.plan.router.config import SHADOW, WEIGHTED, Backend, RouterConfig
from llmkube.plan.router.matching import Decision


@dataclass(frozen=True)
class Attempts:
    order: tuple[str, ...]
    shadows: tuple[str, ...] = ()


def candidates(config: RouterConfig, decision: Decision) -> list[Backend]:
    required = decision.rule.required_capabilities if decision.rule is not None else frozenset()
    found = []
    for name in dict.fromkeys(decision.backends):
        backend = config.backend(name)
        if backend is not None and required <= backend.capabilities:
            found.append(backend)
    return found


#: 1/phi: the step of the golden-ratio (Weyl) sequence, the additive recurrence with the lowest
#: discrepancy. Over n draws the count falling in any interval [0, p) is n*p within about log(n)
#: (3 for every p and start tried up to n = 1,000; tests/unit/router/test_router_matching.py).
GOLDEN_STEP = 0.6180339887498949


def next_draw(previous: float) -> float:
    """The draw after `previous` (0 <= draws < 1)."""
    return (previous + GOLDEN_STEP) % 1.0


def weighted_choice(backends: list[Backend], draw: float) -> Backend | None:
    """The backend whose share of the total weight holds `draw` (0 <= draw < 1)."""
    total = sum(b.weight for b in backends)
    if total <= 0:
        return None
    point = draw * total
    for backend in backends:
        if point < backend.weight:
            return backend
        point -= backend.weight
    return next(b for b in reversed(backends) if b.weight > 0)


def _slo_order(names: list[str], slo: float, p95: Mapping[str, float]) -> list[str]:
    if not names or p95.get(names[0], 0.0) <= slo:
        return names
    within = next((n for n in names[1:] if p95.get(n, 0.0) <= slo), None)
    if within is None:
        return names
    return [within, *(n for n in names if n != within)]


def attempts(
    config: RouterConfig,
    decision: Decision,
    usable: Callable[[str], bool],
    *,
    draw: float = 0.0,
    p95: Mapping[str, float] = MappingProxyType({}),
) -> Attempts:
    found = [b for b in candidates(config, decision) if usable(b.name)]
    if decision.strategy == SHADOW:
        route = [b.name for b in candidates(config, decision)]
        if not route or route[0] not in {b.name for b in found}:
            return Attempts(())
        return Attempts((route[0],), tuple(b.name for b in found if b.name != route[0]))
    names = [b.name for b in found]
    if decision.strategy == WEIGHTED:
        chosen = weighted_choice(found, draw)
        if chosen is None:
            return Attempts(())
        return Attempts((chosen.name, *(n for n in names if n != chosen.name)))
    slo = decision.rule.latency_slo if decision.rule is not None else None
    if slo is not None:
        names = _slo_order(names, slo, p95)
    return Attempts(tuple(names))
