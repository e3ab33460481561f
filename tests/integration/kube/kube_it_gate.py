"""A network-partition switch in front of the real transport (the API server stays real): it can
cut the open watch streams and hold new watch requests until it is opened again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from llmkube.kube.rest.transport import HttpResponse, RequestTimeout, Transport, TransportError


class _CuttableResponse:
    def __init__(self, inner: HttpResponse, cut: asyncio.Event) -> None:
        self._inner = inner
        self._cut = cut

    @property
    def status(self) -> int:
        return self._inner.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._inner.headers

    async def read(self) -> bytes:
        return await self._inner.read()

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        chunks = self._inner.iter_chunks().__aiter__()
        cut = asyncio.ensure_future(self._cut.wait())
        try:
            while True:
                following = asyncio.ensure_future(chunks.__anext__())
                done, _ = await asyncio.wait({following, cut}, return_when=asyncio.FIRST_COMPLETED)
                if following in done:
                    try:
                        yield following.result()
                    except StopAsyncIteration:
                        return
                    continue
                following.cancel()
                raise TransportError("connection cut by the test")
        finally:
            cut.cancel()


class WatchGate:
    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self._open = asyncio.Event()
        self._open.set()
        self._cut = asyncio.Event()
        self.held = 0

    def partition(self) -> None:
        """Cut every open watch and hold new ones until :meth:`heal`."""
        self._open.clear()
        self._cut.set()

    def heal(self) -> None:
        self._cut = asyncio.Event()
        self._open.set()

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        request_timeout: RequestTimeout,
    ) -> Any:
        return self._send(method, url, headers, body, request_timeout)

    @asynccontextmanager
    async def _send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        request_timeout: RequestTimeout,
    ) -> AsyncIterator[HttpResponse]:
        watching = "watch=true" in url
        if watching and not self._open.is_set():
            self.held += 1
            await self._open.wait()
        async with self.inner.send(
            method, url, headers=headers, body=body, request_timeout=request_timeout
        ) as response:
            yield _CuttableResponse(response, self._cut) if watching else response

    async def close(self) -> None:
        await self.inner.close()
