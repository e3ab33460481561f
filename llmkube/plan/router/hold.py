"""How long a request that no backend can serve right now waits for one to come up.

An InferenceService backend with no ready endpoint is most often between pods: a `Recreate`
rollout (the old pod drained and gone, the new one still loading its model), a restart, a first
start. Refusing at once turns every such rollout into 503s for the router's clients; waiting turns
it into a slower first byte. So a request whose route has such a backend, and nothing else to try,
waits for that backend's endpoints to change, at most the router's `--endpoint-wait` and never
longer than the header timeout it would have had with the backend (rule > backend > proxy).

A backend that sleeps (scale to zero: plan/router/wake.py) is woken by the request, and it waits
for it as long as the router's `--wake-timeout` (a model load) allows, never longer than that
header timeout either.

Nothing waits for what an endpoint cannot fix: external backends, endpoints that exist but are in
quarantine (their `Retry-After` says when to come back), cloud backends for sensitive data.
"""

from llmkube.plan.router.config import SHADOW, RouterConfig
from llmkube.plan.router.matching import Decision
from llmkube.plan.router.strategy import candidates
from llmkube.plan.router.timeouts import header_timeout


def endpoint_wait(
    config: RouterConfig,
    decision: Decision,
    endpoint_count: dict[str, int],
    *,
    sensitive: bool,
    limit: float,
    asleep: frozenset[str] = frozenset(),
    wake_limit: float = 0.0,
) -> float:
    """Seconds to wait for an endpoint (0: answer now). `endpoint_count`: the ready endpoints of
    each backend by name (external backends need not be there); `asleep`: the backends that sleep."""
    route = candidates(config, decision)
    if decision.strategy == SHADOW:
        route = route[:1]  # only the first backend answers a shadowed request
    waits = [
        min(
            wake_limit if backend.name in asleep else limit,
            header_timeout(decision.rule, backend, config.header_timeout),
        )
        for backend in route
        if not backend.external
        and endpoint_count.get(backend.name, 0) == 0
        and not (sensitive and backend.tier == "cloud")
    ]
    return max(0.0, max(waits, default=0.0))


def sleeping(
    config: RouterConfig, decision: Decision, asleep: frozenset[str], *, sensitive: bool
) -> tuple[str, ...]:
    """The backends of the route a request would wake (the first only, for a shadowed one)."""
    route = candidates(config, decision)
    if decision.strategy == SHADOW:
        route = route[:1]
    return tuple(
        b.name for b in route if b.name in asleep and not b.external and not (sensitive and b.tier == "cloud")
    )
