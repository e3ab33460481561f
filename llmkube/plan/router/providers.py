"""How an external provider is called: its URL for a request path, and its authentication headers.

openai and litellm: `Authorization: Bearer <key>`; anthropic: `x-api-key: <key>` and
`anthropic-version` (its OpenAI-compatible endpoint takes the OpenAI request shape)."""

from urllib.parse import urlsplit

ANTHROPIC_VERSION = "2023-06-01"


def upstream_url(base: str, path: str) -> str:
    """`base` + the request's path, without doubling a /v1 the base already ends with
    (https://api.openai.com/v1 and https://api.openai.com both reach /v1/chat/completions)."""
    base = base.rstrip("/")
    if urlsplit(base).path.endswith("/v1") and path.startswith("/v1/"):
        path = path[3:]
    return base + path


def auth_headers(provider: str | None, key: str | None) -> dict[str, str]:
    if not key:
        return {}
    if provider == "anthropic":
        return {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
    return {"Authorization": f"Bearer {key}"}
