"""The HTTP transport behind :class:`~llmkube.kube.rest.client.ApiClient`: a tiny protocol so unit tests
can plug in a fake API server (like httpx's ``MockTransport``), and the one aiohttp implementation.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from yarl import URL

from llmkube.apimachinery.proxy import ProxyConfig

__all__ = ["AiohttpTransport", "HttpResponse", "RequestTimeout", "Transport", "TransportError"]


@dataclass(frozen=True, slots=True)
class RequestTimeout:
    """Client-side limits in seconds (None = unlimited).  ``read`` is the gap allowed between two
    reads from the socket: for a watch it is what notices a silently dead connection."""

    total: float | None = 30.0
    connect: float | None = 10.0
    read: float | None = None


class TransportError(Exception):
    """The request never produced an HTTP answer (DNS, TCP, TLS, timeout, reset)."""


class HttpResponse(Protocol):
    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    async def read(self) -> bytes: ...

    def iter_chunks(self) -> AsyncIterator[bytes]: ...


class Transport(Protocol):
    def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        request_timeout: RequestTimeout,
    ) -> AbstractAsyncContextManager[HttpResponse]:
        """Open a request; the response body is read (or streamed) inside the context."""
        ...

    async def close(self) -> None: ...


class _AiohttpResponse:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"reading the response failed: {exc!r}") from exc

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        # iter_any() hands over whatever arrived; no line-length limit applies (lines are split by
        # the caller), unlike StreamReader.readline() which fails on lines over its high-water mark.
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"stream interrupted: {exc!r}") from exc


class AiohttpTransport:
    """One aiohttp session (one connection pool) for every request of the process.

    Each open watch holds a connection for its lifetime (HTTP/1.1), so the pool must exceed the
    number of informers plus the concurrent reconcile requests; 100 is kubernetes_asyncio's default.
    """

    def __init__(
        self,
        ssl_context: ssl.SSLContext | None = None,
        *,
        server_hostname: str | None = None,
        pool_size: int = 100,
        proxy: ProxyConfig | None = None,
    ) -> None:
        self._ssl_context = ssl_context
        self._proxy = proxy or ProxyConfig()
        self._server_hostname = server_hostname
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._pool_size, ssl=self._ssl_context if self._ssl_context is not None else True
            )
            # No session-wide timeout: every request states its own.
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None),
                auto_decompress=True,
                skip_auto_headers=("Content-Type",),
            )
        return self._session

    @asynccontextmanager
    async def _send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        request_timeout: RequestTimeout,
    ) -> AsyncIterator[HttpResponse]:
        session = self._get_session()
        client_timeout = aiohttp.ClientTimeout(
            total=request_timeout.total, connect=request_timeout.connect, sock_read=request_timeout.read
        )
        try:
            response = await session.request(
                method,
                URL(url, encoded=True),
                headers=dict(headers),
                data=body,
                timeout=client_timeout,
                server_hostname=self._server_hostname,
                allow_redirects=False,
                proxy=self._proxy.proxy_for(url),
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TransportError(f"{method} {url}: {exc!r}") from exc
        try:
            yield _AiohttpResponse(response)
        finally:
            response.release()

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        request_timeout: RequestTimeout,
    ) -> AbstractAsyncContextManager[HttpResponse]:
        return self._send(method, url, headers, body, request_timeout)

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
