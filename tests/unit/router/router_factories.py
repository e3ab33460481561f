"""Small ModelRouter specs for the router's unit tests (plain JSON, as the API server stores them)."""

from typing import Any

from llmkube.plan.router.config import RouterConfig, compile_config


def local(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inferenceServiceRef": {"name": name}, **extra}


def external(name: str, provider: str = "openai", model: str = "gpt-x", **extra: Any) -> dict[str, Any]:
    ext: dict[str, Any] = {"provider": provider, "model": model}
    for key in ("url", "credentialsSecretRef"):
        if key in extra:
            ext[key] = extra.pop(key)
    return {"name": name, "external": ext, **extra}


def rule(name: str, *backends: str, match: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    route: dict[str, Any] = {"backends": list(backends)}
    if "strategy" in extra:
        route["strategy"] = extra.pop("strategy")
    found: dict[str, Any] = {"name": name, "route": route, **extra}
    if match is not None:
        found["match"] = match
    return found


def spec(
    *backends: dict[str, Any], rules: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    found: dict[str, Any] = {"backends": list(backends) or [local("a")], **extra}
    if rules is not None:
        found["rules"] = rules
    return found


def config(
    *backends: dict[str, Any], rules: list[dict[str, Any]] | None = None, **extra: Any
) -> RouterConfig:
    return compile_config(spec(*backends, rules=rules, **extra), name="r", namespace="ns")
