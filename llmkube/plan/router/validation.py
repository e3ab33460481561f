"""What a ModelRouter's schema cannot say, checked on the spec as stored (plain JSON).

The controller reports each error in status (Validated=False, naming the field) and the router
refuses a spec with errors; manifests/admission/modelrouter_policy.yaml refuses the same mistakes at
`kubectl apply` where CEL can say them (tests/integration/test_modelrouter_admission.py keeps the
two in step). A *warning* is a setting that cannot have the effect it seems to ask for; the router
still runs the spec.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from llmkube.plan.router.config import SUPPORTED_PROVIDERS, effective_tier, sensitive_classifications
from llmkube.plan.router.durations import parse_duration

Severity = Literal["error", "warning"]

#: `<name>-router-proxy` is a Service name: a DNS label of at most 63 characters
ROUTER_NAME_SUFFIX = "-router-proxy"
MAX_ROUTER_NAME = 63 - len(ROUTER_NAME_SUFFIX)
MIN_TIMEOUT, MAX_TIMEOUT = 0.1, 30 * 60.0
MAX_QUARANTINE = 3600.0
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


@dataclass(frozen=True)
class Issue:
    field: str
    message: str
    severity: Severity = "error"

    def text(self) -> str:
        return f"{self.field}: {self.message}"


def errors(issues: list[Issue]) -> list[Issue]:
    return [issue for issue in issues if issue.severity == "error"]


def _timeout(value: Any, path: str, *, low: float = MIN_TIMEOUT, high: float = MAX_TIMEOUT) -> list[Issue]:
    if not isinstance(value, str) or not value:
        return []
    try:
        seconds = parse_duration(value)
    except ValueError as invalid:
        return [Issue(path, str(invalid))]
    if seconds < low:
        return [Issue(path, f'"{value}" is shorter than {low:g}s: no answer starts that soon')]
    if seconds > high:
        return [Issue(path, f'"{value}" is longer than {high / 60:g}m (a unit typo?)')]
    return []


def _backend(backend: Mapping[str, Any], path: str) -> list[Issue]:
    issues: list[Issue] = []
    ref, external = backend.get("inferenceServiceRef"), backend.get("external")
    if ref is not None and external is not None:
        issues.append(Issue(path, "exactly one of inferenceServiceRef and external, not both"))
    elif ref is None and external is None:
        issues.append(Issue(path, "exactly one of inferenceServiceRef and external is required"))
    if ref is not None and not (ref.get("name") or ""):
        issues.append(Issue(f"{path}.inferenceServiceRef.name", "the InferenceService's name is required"))
    if ref is not None and backend.get("tier") == "cloud":
        issues.append(
            Issue(
                f"{path}.tier", "an InferenceService is local: tier cloud would hide it from sensitive rules"
            )
        )
    if isinstance(external, Mapping):
        issues += _external(external, f"{path}.external")
    check = backend.get("healthCheck") or {}
    probe_path = check.get("path")
    if isinstance(probe_path, str) and probe_path and not probe_path.startswith("/"):
        issues.append(Issue(f"{path}.healthCheck.path", f'"{probe_path}" must start with /'))
    issues += _timeout(backend.get("timeout"), f"{path}.timeout")
    return issues


def _external(external: Mapping[str, Any], path: str) -> list[Issue]:
    issues: list[Issue] = []
    provider = external.get("provider")
    if provider not in SUPPORTED_PROVIDERS:
        issues.append(
            Issue(
                f"{path}.provider",
                f"{provider} is not served by this router (it forwards OpenAI-shaped requests): put a "
                "LiteLLM proxy in front of it and use provider litellm",
            )
        )
    url = external.get("url")
    if isinstance(url, str) and url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            issues.append(Issue(f"{path}.url", f'"{url}" is not an http(s) URL with a host'))
        elif parts.query or parts.fragment or parts.username is not None:
            issues.append(Issue(f"{path}.url", f'"{url}" may not carry a query, a fragment or credentials'))
    elif provider == "litellm":
        issues.append(Issue(f"{path}.url", "required for provider litellm (the LiteLLM proxy's URL)"))
    secret = external.get("credentialsSecretRef")
    if secret is not None and not (secret.get("name") or ""):
        issues.append(Issue(f"{path}.credentialsSecretRef.name", "the Secret's name is required"))
    return issues


def _rules(spec: Mapping[str, Any], backends: dict[str, Mapping[str, Any]]) -> list[Issue]:
    issues: list[Issue] = []
    sensitive = sensitive_classifications(spec)
    seen: set[str] = set()
    for i, rule in enumerate(spec.get("rules") or ()):
        path = f"spec.rules[{i}]"
        name = rule.get("name") or ""
        if name in seen:
            issues.append(Issue(f"{path}.name", f'duplicate rule name "{name}"'))
        seen.add(name)
        route = rule.get("route") or {}
        names = list(route.get("backends") or ())
        for j, backend in enumerate(names):
            if backend not in backends:
                issues.append(Issue(f"{path}.route.backends[{j}]", f'no backend is named "{backend}"'))
        match = rule.get("match") or {}
        matched = sorted({str(c).lower() for c in match.get("dataClassification") or ()} & sensitive)
        if matched:
            listed = ", ".join(matched)
            if not rule.get("failClosed"):
                issues.append(
                    Issue(
                        f"{path}.failClosed",
                        f"the rule matches sensitive classifications ({listed}): set true",
                    )
                )
            for j, backend in enumerate(names):
                if backend in backends and effective_tier(backends[backend]) == "cloud":
                    issues.append(
                        Issue(
                            f"{path}.route.backends[{j}]",
                            f'"{backend}" is a cloud backend, and the rule matches sensitive '
                            f"classifications ({listed}): only local backends may serve them",
                        )
                    )
        for header in match.get("headers") or {}:
            if not _HEADER_NAME.match(str(header)):
                issues.append(Issue(f"{path}.match.headers", f'"{header}" is not a header name'))
        required = set(match.get("requiredCapabilities") or ())
        known = [backends[b] for b in names if b in backends]
        if required and known and not any(required <= set(b.get("capabilities") or ()) for b in known):
            issues.append(
                Issue(
                    f"{path}.match.requiredCapabilities",
                    "no backend of the route has all of "
                    + ", ".join(sorted(required))
                    + ": it never matches",
                    "warning",
                )
            )
        if route.get("strategy") == "weighted" and known and all(b.get("weight") == 0 for b in known):
            issues.append(Issue(f"{path}.route.backends", "every backend has weight 0: none can be chosen"))
        issues += _timeout(rule.get("timeout"), f"{path}.timeout")
    return issues


def _policy(spec: Mapping[str, Any], rule_names: set[str]) -> list[Issue]:
    policy = spec.get("policy") or {}
    issues: list[Issue] = []
    seen: set[str] = set()
    for i, budget in enumerate(policy.get("budgets") or ()):
        path = f"spec.policy.budgets[{i}]"
        name = budget.get("name") or ""
        if name in seen:
            issues.append(Issue(f"{path}.name", f'duplicate budget name "{name}"'))
        seen.add(name)
        if budget.get("scope") == "rule":
            rule = budget.get("ruleName") or ""
            if not rule:
                issues.append(Issue(f"{path}.ruleName", "required for scope rule"))
            elif rule not in rule_names:
                issues.append(Issue(f"{path}.ruleName", f'no rule is named "{rule}"'))
        header = budget.get("headerKey")
        if isinstance(header, str) and header and not _HEADER_NAME.match(header):
            issues.append(Issue(f"{path}.headerKey", f'"{header}" is not a header name'))
        if budget.get("maxTokens") is None and not budget.get("maxUSD"):
            issues.append(Issue(path, "set maxTokens, maxUSD or both"))
    classification = policy.get("classification") or {}
    header = classification.get("headerKey")
    if isinstance(header, str) and header and not _HEADER_NAME.match(header):
        issues.append(Issue("spec.policy.classification.headerKey", f'"{header}" is not a header name'))
    audit = policy.get("auditLog") or {}
    if audit.get("sink") == "otlp":
        issues.append(
            Issue(
                "spec.policy.auditLog.sink", "otlp is not supported: use stdout and collect the container log"
            )
        )
    file_path = audit.get("filePath")
    if (
        isinstance(file_path, str)
        and file_path
        and (not file_path.startswith("/") or file_path.endswith("/"))
    ):
        issues.append(Issue("spec.policy.auditLog.filePath", f'"{file_path}" must be an absolute file path'))
    keys = ((policy.get("apiKeys") or {}).get("secretRef") or {}).get("name")
    if policy.get("apiKeys") is not None and not keys:
        issues.append(Issue("spec.policy.apiKeys.secretRef.name", "the Secret's name is required"))
    return issues


def validate(spec: Mapping[str, Any], name: str) -> list[Issue]:
    issues: list[Issue] = []
    if len(name) > MAX_ROUTER_NAME:
        issues.append(
            Issue(
                "metadata.name",
                f'"{name}" is {len(name)} characters; at most {MAX_ROUTER_NAME}, as the router\'s Service '
                f'"<name>{ROUTER_NAME_SUFFIX}" is a DNS label',
            )
        )
    backends: dict[str, Mapping[str, Any]] = {}
    for i, backend in enumerate(spec.get("backends") or ()):
        path = f"spec.backends[{i}]"
        backend_name = backend.get("name") or ""
        if backend_name in backends:
            issues.append(Issue(f"{path}.name", f'duplicate backend name "{backend_name}"'))
        backends.setdefault(backend_name, backend)
        issues += _backend(backend, path)
    default = spec.get("defaultRoute")
    if default and default not in backends:
        issues.append(Issue("spec.defaultRoute", f'no backend is named "{default}"'))
    issues += _rules(spec, backends)
    issues += _policy(spec, {r.get("name") or "" for r in spec.get("rules") or ()})
    proxy = spec.get("proxy") or {}
    issues += _timeout(proxy.get("responseHeaderTimeout"), "spec.proxy.responseHeaderTimeout")
    issues += _timeout(
        proxy.get("quarantineDuration"), "spec.proxy.quarantineDuration", low=0, high=MAX_QUARANTINE
    )
    return issues
