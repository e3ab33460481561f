"""How long a request waits for response headers: the rule's timeout, else the backend's, else the
proxy's responseHeaderTimeout, which is also the cap (a rule or backend may shorten the wait, never
lengthen it: the reference's documented behaviour). Streams are not cut once headers arrived."""

from llmkube.plan.router.config import Backend, Rule


def header_timeout(rule: Rule | None, backend: Backend, cap: float) -> float:
    chosen = rule.timeout if rule is not None and rule.timeout else backend.timeout
    return min(chosen, cap) if chosen else cap
