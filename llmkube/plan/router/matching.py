"""Which rule a request falls under: the first whose every declared condition holds (an absent
condition holds for every request), else the defaultRoute, else none (503)."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from llmkube.plan.router.config import PRIMARY_FALLBACK, RouterConfig, Rule, Strategy


@dataclass(frozen=True)
class Features:
    """What rules look at, extracted once per request."""

    model: str
    #: lower-case; "" when the request has none
    classification: str = ""
    task_complexity: str = ""
    #: lower-case names, first value of each
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    #: None: the defaultRoute (or nothing, when `backends` is empty)
    rule: Rule | None
    backends: tuple[str, ...]
    strategy: Strategy = PRIMARY_FALLBACK
    fail_closed: bool = False

    @property
    def rule_name(self) -> str:
        """The `rule` label of metrics and audit lines: the rule, `default`, or `none`."""
        if self.rule is not None:
            return self.rule.name
        return "default" if self.backends else "none"


NO_ROUTE = Decision(rule=None, backends=())


def rule_matches(config: RouterConfig, rule: Rule, features: Features) -> bool:
    if rule.data_classification and features.classification not in rule.data_classification:
        return False
    if rule.task_complexity is not None and features.task_complexity != rule.task_complexity:
        return False
    if rule.models and not any(glob.matches(features.model) for glob in rule.models):
        return False
    for name, value in rule.headers:
        if features.headers.get(name) != value:
            return False
    if rule.required_capabilities:
        return any(
            (backend := config.backend(name)) is not None
            and rule.required_capabilities <= backend.capabilities
            for name in rule.backends
        )
    return True


def decide(config: RouterConfig, features: Features) -> Decision:
    for rule in config.rules:
        if rule_matches(config, rule, features):
            return Decision(rule, rule.backends, rule.strategy, rule.fail_closed)
    if config.default_route:
        return Decision(None, (config.default_route,))
    return NO_ROUTE


#: the serving mode (v0.9 InferenceService spec.mode) each endpoint needs
MODE_OF_ENDPOINT: Mapping[str, str] = {"embeddings": "embedding", "rerank": "rerank"}


def for_endpoint(
    config: RouterConfig, decision: Decision, endpoint: str, mode_of: Callable[[str], str]
) -> Decision:
    """/v1/embeddings and /v1/rerank go to the backends that serve them (an InferenceService of that
    mode): those of the decision when it has some, else the router's own; chat and completions
    leave embedding and rerank backends out while another remains. `mode_of` names a backend's
    mode ("" when unknown: external backends, services without the label)."""
    wanted = MODE_OF_ENDPOINT.get(endpoint)
    if wanted is None:
        generating = tuple(b for b in decision.backends if mode_of(b) not in MODE_OF_ENDPOINT.values())
        return replace(decision, backends=generating) if generating else decision
    chosen = tuple(b for b in decision.backends if mode_of(b) == wanted)
    if not chosen:
        chosen = tuple(sorted(name for name in config.backends if mode_of(name) == wanted))
    return replace(decision, backends=chosen) if chosen else decision
