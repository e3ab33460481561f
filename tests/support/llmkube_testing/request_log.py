"""What a controller asked of the API server, counted: the observer tests install on its client.

The controller's own client counts nothing but ``rest_client_requests_total``. A test that must
prove a converged controller writes nothing, that a refusal was RBAC's and not a namespace being
deleted, or that everything the controller asked for is in its roles, installs a
:class:`RequestLog` (``ApiClient(observer=...)``, ``Manager(request_observer=...)``, or the
controller harness, which always does) and reads it:

- ``request_counts``: (method, HTTP status or ``"<error>"``) -> attempts;
- ``api_requests``: what each attempt asked for in RBAC's terms (request_info.py) -> attempts;
- ``refusals``: every non-2xx answer by its Status (method, code, reason, cause reasons).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import NamedTuple

from llmkube.kube.errors import NAMESPACE_TERMINATING, ApiError
from llmkube.kube.rest.client import APPLY_PATCH, MUTATING_METHODS
from llmkube_testing.request_info import ApiRequest, api_request, request_namespace

__all__ = ["ApiRequest", "Refusal", "RequestLog"]


class Refusal(NamedTuple):
    """A non-2xx answer as its Status tells it: ``reason`` and the ``details.causes`` reasons."""

    method: str
    status: int
    reason: str
    causes: tuple[str, ...]

    @classmethod
    def of(cls, method: str, error: ApiError) -> Refusal:
        return cls(method, error.status, error.reason, tuple(cause.reason for cause in error.causes))


class RequestLog:
    """An :class:`~llmkube.kube.rest.client.RequestObserver` that keeps counts."""

    def __init__(self) -> None:
        #: (method, status code or "<error>") -> number of attempts
        self.request_counts: Counter[tuple[str, str]] = Counter()
        #: what each attempt asked for, as RBAC reads it -> number of attempts (any outcome)
        self.api_requests: Counter[ApiRequest] = Counter()
        #: every non-2xx answer, by what the Status says -> number of such answers
        self.refusals: Counter[Refusal] = Counter()
        #: namespace ("" for cluster-scoped) -> POST/PUT/PATCH/DELETE attempts there
        self.mutating_by_namespace: Counter[str] = Counter()
        #: (namespace, refusal) of every 403
        self.forbidden_by_namespace: Counter[tuple[str, Refusal]] = Counter()
        #: namespaces where a test makes the API server refuse by design (a ResourceQuota)
        self.excused: set[str] = set()

    # -- the observer -----------------------------------------------------------------------------

    def answered(
        self,
        method: str,
        path: str,
        params: Mapping[str, object] | None,
        content_type: str | None,
        status: int | None,
    ) -> None:
        self.request_counts[(method, "<error>" if status is None else str(status))] += 1
        if method in MUTATING_METHODS:
            self.mutating_by_namespace[request_namespace(path)] += 1
        asked = api_request(method, path, params)
        self.api_requests[asked] += 1
        if status == 201 and content_type == APPLY_PATCH:
            # An apply that created the object was authorized as a create as well.
            self.api_requests[asked._replace(verb="create")] += 1

    def refused(self, method: str, path: str, error: ApiError) -> None:
        refusal = Refusal.of(method, error)
        self.refusals[refusal] += 1
        if error.status == 403:
            self.forbidden_by_namespace[(request_namespace(path), refusal)] += 1

    def excuse_forbidden_in(self, namespace: str) -> None:
        """A test's namespace where a 403 is its own doing, not RBAC's: an admission plugin such as
        ResourceQuota answers Forbidden with a Status shaped like an authorizer's (reason, details,
        no causes), so only the test that sets it up can say which refusals are its."""
        self.excused.add(namespace)

    # -- what tests read --------------------------------------------------------------------------

    def mutating_requests(self, namespace: str | None = None) -> int:
        """How many POST/PUT/PATCH/DELETE attempts were made (any outcome); in `namespace` only when
        given (earlier tests' namespaces can still be going away meanwhile, with writes of their own)."""
        if namespace is not None:
            return self.mutating_by_namespace[namespace]
        return sum(count for (method, _), count in self.request_counts.items() if method in MUTATING_METHODS)

    def total_requests(self) -> int:
        return sum(self.request_counts.values())

    def by_method(self) -> dict[str, int]:
        """Attempts per HTTP method, any outcome."""
        counts: Counter[str] = Counter()
        for (method, _), count in self.request_counts.items():
            counts[method] += count
        return dict(counts)

    def rbac_refusals(self) -> dict[Refusal, int]:
        """The 403s an authorizer gave: every Forbidden except those for new content in a namespace
        being deleted, which is the namespace's lifecycle, not a missing permission, and those in
        namespaces a test excused."""
        found: Counter[Refusal] = Counter()
        for (namespace, refusal), count in self.forbidden_by_namespace.items():
            if NAMESPACE_TERMINATING not in refusal.causes and namespace not in self.excused:
                found[refusal] += count
        return dict(found)

    def used(self) -> set[tuple[str, str, str]]:
        """(verb, group, resource[/subresource]) of everything asked for: what RBAC had to grant."""
        return {(request.verb, request.group, request.rbac_resource) for request in self.api_requests}
