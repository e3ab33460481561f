"""Where a ModelRouter may send a provider's key: the URL of an external backend with a
`credentialsSecretRef` gets the Secret's key in its headers, and whoever writes the spec chooses
that URL. So a credentialed backend may only lead to its provider's own host over https
(`https://api.openai.com`, `https://api.anthropic.com`: where the key is meant to go) or to a host
the admin listed in `--router-external-hosts` (a LiteLLM proxy, a provider's regional endpoint).
A backend without credentials sends no key and may lead anywhere egress allows (plan/router/egress.py).

Held twice, by the same function: the controller refuses such a spec (PolicyViolation, nothing
deployed or changed), and the router itself refuses to load it (a router already running keeps its
last spec), so a spec edited under a running router never sends its mounted key elsewhere. The
controller hands the router the admin's list (`llmkube router --external-hosts`).

Light on purpose: the router process imports it (so its issues are validation's `Issue`, not
plan/tenancy.py's, whose Pod Security rules the router need not load)."""

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from llmkube.plan.allowed_hosts import AllowedHost
from llmkube.plan.router.config import DEFAULT_URLS, external_url
from llmkube.plan.router.validation import Issue

#: the controller's flag; the router's own is `--external-hosts`
EXTERNAL_HOSTS_FLAG = "--router-external-hosts"
#: each provider's own host, where its keys are meant to go (https only)
OFFICIAL_HOSTS: Mapping[str, str] = MappingProxyType(
    {provider: str(urlsplit(url).hostname) for provider, url in DEFAULT_URLS.items()}
)


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def credential_host_refusal(provider: str, url: str, allowed: Sequence[AllowedHost]) -> str | None:
    """Why a key for `provider` may not be sent to `url` (the backend's resolved base URL), or None."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    try:
        port = parts.port or _default_port(scheme)
    except ValueError:
        port = 0  # not a port: no entry allows it
    if (
        scheme in ("http", "https")
        and host
        and not (parts.username is not None or parts.query or parts.fragment)
    ):
        if scheme == "https" and host == OFFICIAL_HOSTS.get(provider) and port == 443:
            return None
        if port and any(entry.names(host, port) for entry in allowed):
            return None
    official = OFFICIAL_HOSTS.get(provider)
    own = f"{provider}'s own host (https://{official})" if official else f"{provider} has no host of its own"
    listed = ", ".join(entry.entry for entry in allowed) or "none"
    return (
        f'"{url}" may not receive this backend\'s key: credentials go only to {own} and the hosts an '
        f"admin lists in {EXTERNAL_HOSTS_FLAG} ({listed})"
    )


def credential_host_issues(spec: Mapping[str, Any], allowed: Sequence[AllowedHost]) -> list[Issue]:
    """Every external backend with credentials whose URL is not allowed (plain JSON, as stored)."""
    issues = []
    for index, backend in enumerate(spec.get("backends") or ()):
        external = backend.get("external") if isinstance(backend, Mapping) else None
        if not isinstance(external, Mapping):
            continue
        if not ((external.get("credentialsSecretRef") or {}).get("name") or ""):
            continue
        url = external_url(external)
        if url is None:
            continue  # litellm without url: validation reports it
        refusal = credential_host_refusal(str(external.get("provider") or ""), url, allowed)
        if refusal is not None:
            secret = external["credentialsSecretRef"]["name"]
            issues.append(
                Issue(
                    f"spec.backends[{index}].external.url",
                    f'{refusal}; the key comes from Secret "{secret}"',
                )
            )
    return issues
