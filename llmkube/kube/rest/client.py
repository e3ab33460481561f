"""The API client: raw REST paths, orjson bodies, typed errors, explicit timeouts, 429 handling.

One instance per process (one connection pool).  Every request is counted in
``rest_client_requests_total{code,method,host}``.  A test that wants to see more (how many writes
a converged controller made, what it asked for in RBAC's terms, which refusals it got) installs an
:class:`RequestObserver` (``llmkube_testing.request_log``); the controller's own client has none,
so it pays nothing for that accounting.  With leader election, :attr:`ApiClient.write_guard` is
asked before every mutating request (kube/leader), so nothing is written without the lease.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol
from urllib.parse import urlencode, urlsplit

import orjson

import llmkube
from llmkube.kube import metrics, yaml_json
from llmkube.kube.clock import Clock, RealClock
from llmkube.kube.errors import ApiError, Unauthorized, error_from_response
from llmkube.kube.resource import Resource
from llmkube.kube.rest.config import AuthProvider, ClientConfig, StaticAuth
from llmkube.kube.rest.transport import (
    AiohttpTransport,
    HttpResponse,
    RequestTimeout,
    Transport,
    TransportError,
)
from llmkube.kube.types import Obj

__all__ = [
    "APPLY_PATCH",
    "DEFAULT_FIELD_MANAGER",
    "JSON_PATCH",
    "MERGE_PATCH",
    "MUTATING_METHODS",
    "STRATEGIC_MERGE_PATCH",
    "USER_AGENT",
    "ApiClient",
    "RequestObserver",
    "WriteGuard",
]

USER_AGENT: Final = f"llmkube-controller/{llmkube.__version__}"
DEFAULT_FIELD_MANAGER: Final = "llmkube-controller"

APPLY_PATCH: Final = "application/apply-patch+yaml"  # JSON a YAML parser reads back: kube/yaml_json.py
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"

MUTATING_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})

_DEFAULT_TIMEOUT = RequestTimeout()

Params = Mapping[str, str | int | bool | None]


class WriteGuard(Protocol):
    def check_write(self, method: str, path: str) -> None:
        """Raise to refuse a mutating request before it is sent."""
        ...


class RequestObserver(Protocol):
    """Told about every request the client makes: what tests install to count them."""

    def answered(
        self, method: str, path: str, params: Params | None, content_type: str | None, status: int | None
    ) -> None:
        """One attempt (retries are attempts of their own) and its HTTP status; None when no
        answer came (the transport failed)."""
        ...

    def refused(self, method: str, path: str, error: ApiError) -> None:
        """A non-2xx answer to a request for `path`, as its Status tells it (reason, ``details.causes``)."""
        ...


def _encode_params(params: Params | None) -> str:
    if not params:
        return ""
    pairs = [
        (name, ("true" if value else "false") if isinstance(value, bool) else str(value))
        for name, value in params.items()
        if value is not None
    ]
    return urlencode(pairs) if pairs else ""


class ApiClient:
    def __init__(
        self,
        host: str,
        *,
        transport: Transport,
        auth: AuthProvider | None = None,
        user_agent: str = USER_AGENT,
        request_timeout: RequestTimeout = _DEFAULT_TIMEOUT,
        max_retries: int = 10,
        max_retry_after: float = 60.0,
        clock: Clock | None = None,
        observer: RequestObserver | None = None,
    ) -> None:
        self.host = host.rstrip("/")
        self._host_label = urlsplit(self.host).netloc or self.host
        self._transport = transport
        self._auth = auth or StaticAuth()
        self._user_agent = user_agent
        self.request_timeout = request_timeout
        self._max_retries = max_retries
        self._max_retry_after = max_retry_after
        self._clock = clock or RealClock()
        #: told about every request and refusal (tests); None in the controller
        self.observer = observer
        #: asked before every POST/PUT/PATCH/DELETE (each attempt, retries included)
        self.write_guard: WriteGuard | None = None

    @classmethod
    def from_config(cls, config: ClientConfig, **kwargs: Any) -> ApiClient:
        transport = AiohttpTransport(
            config.ssl_context, server_hostname=config.tls_server_name, proxy=config.proxy
        )
        return cls(config.host, transport=transport, auth=config.auth, **kwargs)

    def without_write_guard(self) -> ApiClient:
        """The same client (connection pool, credentials, observer) without the write guard: for
        the leader elector, whose Lease writes are what the guard is about."""
        view = copy.copy(self)
        view.write_guard = None
        return view

    async def close(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- accounting -----------------------------------------------------------------------------

    def _count(
        self, method: str, path: str, params: Params | None, content_type: str | None, status: int | None
    ) -> None:
        metrics.REST_CLIENT_REQUESTS.labels(
            "<error>" if status is None else str(status), method, self._host_label
        ).inc()
        if self.observer is not None:
            self.observer.answered(method, path, params, content_type, status)

    # -- the request loop -----------------------------------------------------------------------

    @asynccontextmanager
    async def open(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        request_timeout: RequestTimeout | None = None,
    ) -> AsyncIterator[HttpResponse]:
        """Send a request and yield the successful (2xx) response, unread.

        Non-2xx answers become typed :class:`ApiError` s.  ``429`` (and ``5xx`` carrying
        ``Retry-After``) are retried after the server's delay, up to ``max_retries`` times, because
        API Priority and Fairness rejects before doing any work.  A ``401`` triggers one credential
        refresh and retry (rotated service-account token, expired exec-plugin token)."""
        query = _encode_params(params)
        url = f"{self.host}{path}?{query}" if query else f"{self.host}{path}"
        refreshed = False
        attempt = 0
        while True:
            attempt += 1
            if self.write_guard is not None and method in MUTATING_METHODS:
                self.write_guard.check_write(method, path)  # also before a retry: time has passed
            headers = {"User-Agent": self._user_agent, "Accept": "application/json"}
            headers.update(await self._auth.headers())
            if content_type is not None:
                headers["Content-Type"] = content_type
            async with contextlib.AsyncExitStack() as stack:
                try:
                    response = await stack.enter_async_context(
                        self._transport.send(
                            method,
                            url,
                            headers=headers,
                            body=body,
                            request_timeout=request_timeout or self.request_timeout,
                        )
                    )
                except TransportError:
                    # Counted only when no answer came: a stream cut later is not a second request.
                    self._count(method, path, params, content_type, None)
                    raise
                status = response.status
                self._count(method, path, params, content_type, status)
                if 200 <= status < 300:
                    yield response
                    return
                retry_after = response.headers.get("Retry-After")
                error = error_from_response(status, await response.read(), retry_after)
                if self.observer is not None:
                    self.observer.refused(method, path, error)
            if isinstance(error, Unauthorized) and not refreshed and await self._auth.refresh():
                refreshed = True
                continue
            if self._should_retry(error, attempt):
                await self._clock.sleep(min(error.retry_after or 1.0, self._max_retry_after))
                continue
            raise error

    def _should_retry(self, error: ApiError, attempt: int) -> bool:
        if attempt > self._max_retries:
            return False
        return error.status == 429 or (error.status >= 500 and error.retry_after is not None)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: RequestTimeout | None = None,
    ) -> Any:
        """Send a request with an orjson-encoded body and return the decoded JSON answer."""
        payload = None if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        async with self.open(
            method,
            path,
            params=params,
            body=payload,
            content_type=content_type if payload is not None else None,
            request_timeout=request_timeout,
        ) as response:
            raw = await response.read()
        return orjson.loads(raw) if raw else None

    # -- verbs ----------------------------------------------------------------------------------

    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        request_timeout: RequestTimeout | None = None,
    ) -> Obj:
        result: Obj = await self.request(
            "GET", resource.object_path(name, namespace), request_timeout=request_timeout
        )
        return result

    async def list_page(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        request_timeout: RequestTimeout | None = None,
    ) -> Obj:
        """One LIST page (the raw ``*List`` object: ``items`` and ``metadata.continue``)."""
        params: dict[str, str | int | bool | None] = {
            "labelSelector": label_selector or None,
            "fieldSelector": field_selector or None,
            "limit": limit or None,
            "continue": continue_token or None,
            # The server refuses a resourceVersion together with a continue token.
            "resourceVersion": None if continue_token else resource_version,
        }
        result: Obj = await self.request(
            "GET", resource.collection_path(namespace), params=params, request_timeout=request_timeout
        )
        return result

    async def list_all(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        page_size: int = 500,
    ) -> list[Obj]:
        """Every item, following continue tokens (a convenience for tests and one-off reads)."""
        items: list[Obj] = []
        token: str | None = None
        while True:
            page = await self.list_page(
                resource, namespace, label_selector=label_selector, limit=page_size, continue_token=token
            )
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    async def create(
        self,
        resource: Resource,
        obj: Obj,
        namespace: str | None = None,
        *,
        field_manager: str | None = None,
        request_timeout: RequestTimeout | None = None,
    ) -> Obj:
        """POST; `field_manager` names who owns the fields it sets (the server's default otherwise)."""
        namespace = namespace or (obj.get("metadata") or {}).get("namespace")
        result: Obj = await self.request(
            "POST",
            resource.collection_path(namespace if resource.namespaced else None),
            params={"fieldManager": field_manager} if field_manager else None,
            body=obj,
            request_timeout=request_timeout,
        )
        return result

    async def replace(
        self,
        resource: Resource,
        obj: Obj,
        *,
        subresource: str | None = None,
        request_timeout: RequestTimeout | None = None,
    ) -> Obj:
        """PUT (an update guarded by ``metadata.resourceVersion`` when the object carries one)."""
        meta = obj.get("metadata") or {}
        path = resource.object_path(meta["name"], meta.get("namespace"), subresource)
        result: Obj = await self.request("PUT", path, body=obj, request_timeout=request_timeout)
        return result

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = MERGE_PATCH,
        subresource: str | None = None,
        field_manager: str | None = None,
        request_timeout: RequestTimeout | None = None,
    ) -> Obj:
        params = {"fieldManager": field_manager}
        path = resource.object_path(name, namespace, subresource)
        result: Obj = await self.request(
            "PATCH", path, params=params, body=patch, content_type=patch_type, request_timeout=request_timeout
        )
        return result

    async def apply(
        self,
        resource: Resource,
        obj: Obj,
        *,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        force: bool = True,
        subresource: str | None = None,
        request_timeout: RequestTimeout | None = None,
    ) -> tuple[Obj, int]:
        """Server-side apply; returns the stored object and the HTTP status (201 = created)."""
        meta = obj.get("metadata") or {}
        path = resource.object_path(meta["name"], meta.get("namespace"), subresource)
        params: dict[str, str | int | bool | None] = {"fieldManager": field_manager, "force": force or None}
        async with self.open(
            "PATCH",
            path,
            params=params,
            body=yaml_json.dumps(obj),
            content_type=APPLY_PATCH,
            request_timeout=request_timeout,
        ) as response:
            status = response.status
            raw = await response.read()
        return orjson.loads(raw), status

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
        request_timeout: RequestTimeout | None = None,
    ) -> Obj | None:
        """DELETE with optional preconditions (a recreate must not delete a newer object)."""
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {
            key: value for key, value in (("uid", uid), ("resourceVersion", resource_version)) if value
        }
        if preconditions:
            options["preconditions"] = preconditions
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        result: Obj | None = await self.request(
            "DELETE", resource.object_path(name, namespace), body=options, request_timeout=request_timeout
        )
        return result

    @asynccontextmanager
    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        read_timeout: float | None = 90.0,
    ) -> AsyncIterator[HttpResponse]:
        """Open a WATCH; the caller reads newline-delimited JSON events from ``iter_chunks()``.

        The client timeout has no total (the server closes after ``timeout_seconds``), a connect
        limit, and a socket read limit that notices a silently dead connection."""
        params: dict[str, str | int | bool | None] = {
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": allow_bookmarks or None,
            "timeoutSeconds": timeout_seconds,
            "labelSelector": label_selector or None,
            "fieldSelector": field_selector or None,
        }
        limits = RequestTimeout(total=None, connect=10.0, read=read_timeout)
        path = resource.collection_path(namespace)
        async with self.open("GET", path, params=params, request_timeout=limits) as response:
            yield response
