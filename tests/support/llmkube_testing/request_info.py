"""What an API request asks for, in the authorizer's terms: verb, API group, resource and subresource.

The same reading of a path as the API server's RequestInfoFactory does before it asks RBAC, so the
tests' request log (request_log.py) counts a controller's requests the way RBAC rules are written,
and tests compare what was used with what a role grants:

    GET    /apis/apps/v1/namespaces/ns/deployments/web        -> get    apps deployments
    GET    /apis/apps/v1/deployments?watch=true                 -> watch  apps deployments
    PATCH  /apis/x.dev/v1/namespaces/ns/things/a/status         -> patch  x.dev things status
    DELETE /api/v1/namespaces/ns/pods                           -> deletecollection "" pods
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["ApiRequest", "api_request"]

_VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch"}


class ApiRequest(NamedTuple):
    verb: str
    group: str  # "" for the core API
    resource: str  # plural; "" for a non-resource path (/healthz, /version)
    subresource: str  # "" when none

    @property
    def rbac_resource(self) -> str:
        """How an RBAC rule names it: `deployments`, `inferenceservices/status`."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def _is_true(value: object) -> bool:
    return str(value).lower() in ("true", "1")


def api_request(method: str, path: str, params: Mapping[str, object] | None = None) -> ApiRequest:
    """The request as RBAC sees it. `params` are the query parameters (for `watch`)."""
    method = method.upper()
    parts = [part for part in path.split("?", 1)[0].split("/") if part]
    if len(parts) >= 2 and parts[0] == "api":
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return ApiRequest(method.lower(), "", "", "")
    # /namespaces/<ns>/<resource>... is namespaced; /namespaces and /namespaces/<ns> are the
    # Namespace resource itself (and /namespaces/<ns>/status|finalize its subresources).
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method == "GET":
        verb = "watch" if _is_true((params or {}).get("watch")) else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERB_BY_METHOD.get(method, method.lower())
    return ApiRequest(verb, group, resource, subresource)


def request_namespace(path: str) -> str:
    """The namespace a request's path names ("" for cluster-scoped paths and Namespaces themselves)."""
    parts = [part for part in path.split("?", 1)[0].split("/") if part]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else []
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        return rest[1]
    return ""
