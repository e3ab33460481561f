"""An HTTPS reverse proxy in front of the API server that misbehaves on request, for fault tests.

It terminates TLS with the API server's own serving certificate (valid for 127.0.0.1 and signed by
the cluster CA, so a kubeconfig pointed at the proxy still verifies), forwards every request to the
real API server and streams the answer back, watches included. It can:

* answer a share of requests itself with 429 (with Retry-After), 500 or 503, or reset the
  connection, at a probability set at any time (`inject`);
* silence the watch streams that are open (`silence_watches`): the connection stays up and quiet,
  as behind a load balancer that lost its backend, until the client gives up on it; what the API
  server still sends on them is read and kept (`withheld`), so a test knows an event was held back;
* count what passed through (`log`: method, path, status or fault, time).

    proxy = await FaultProxy.start(cluster.server, cluster.workdir / "pki")
    kubeconfig = proxy.kubeconfig(cluster.controller_kubeconfig, tmp_path / "via-proxy")
    proxy.inject(0.3, FAULTS)
    ...
    await proxy.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import ssl
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import yaml
from aiohttp import web

__all__ = ["FAULTS", "Fault", "FaultProxy", "Passed"]

# What a client may get instead of the API server's answer.
Fault = str
FAULTS: tuple[Fault, ...] = ("429", "500", "503", "reset")
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "upgrade"}
)


@dataclass(frozen=True)
class Passed:
    at: float  # time.monotonic()
    method: str
    path: str
    watch: bool
    outcome: str  # the status code the API server gave, or the fault injected ("429", "reset", ...)
    injected: bool


def _status(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


@dataclass(eq=False)  # kept in a set: identity, not value
class _Stream:
    """An open watch stream: silenced streams stop relaying but stay open."""

    silenced: asyncio.Event = field(default_factory=asyncio.Event)
    #: what the API server sent after the stream was silenced (never relayed)
    withheld: bytearray = field(default_factory=bytearray)


class FaultProxy:
    def __init__(self, upstream: str, pki_dir: Path, *, seed: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self._pki_dir = pki_dir
        self._rng = random.Random(seed)
        self.probability = 0.0
        self.faults: tuple[Fault, ...] = FAULTS
        self.retry_after = 1
        self.log: list[Passed] = []
        self._streams: set[_Stream] = set()
        self._silenced: list[_Stream] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    @classmethod
    async def start(cls, upstream: str, pki_dir: Path, *, seed: int = 0) -> FaultProxy:
        proxy = cls(upstream, pki_dir, seed=seed)
        await proxy._serve()
        return proxy

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, kubeconfig: Path, target: Path) -> Path:
        """A copy of `kubeconfig` whose server is this proxy."""
        config = yaml.safe_load(kubeconfig.read_text())
        for cluster in config.get("clusters") or []:
            cluster["cluster"]["server"] = self.url
        target.write_text(yaml.safe_dump(config))
        return target

    # -- switches -------------------------------------------------------------------------------

    def inject(self, probability: float, faults: Sequence[Fault] = FAULTS) -> None:
        """From now on answer `probability` of the requests with one of `faults` (0 turns it off)."""
        self.probability = probability
        self.faults = tuple(faults)

    def silence_watches(self) -> int:
        """Stop relaying the watch streams open now (they stay open); returns how many."""
        for stream in self._streams:
            stream.silenced.set()
            self._silenced.append(stream)
        return len(self._streams)

    def withheld(self) -> list[bytes]:
        """Per silenced stream, what the API server sent on it that the client never got."""
        return [bytes(stream.withheld) for stream in self._silenced]

    @property
    def open_watches(self) -> int:
        return sum(not stream.silenced.is_set() for stream in self._streams)

    # -- counting -------------------------------------------------------------------------------

    def requests_between(self, start: float, end: float) -> list[Passed]:
        return [passed for passed in self.log if start <= passed.at < end]

    # -- serving --------------------------------------------------------------------------------

    async def _serve(self) -> None:
        upstream_tls = ssl.create_default_context(cafile=str(self._pki_dir / "ca.crt"))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=upstream_tls, limit=0),
            timeout=aiohttp.ClientTimeout(total=None, connect=10),
            auto_decompress=False,
        )
        serving_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        serving_tls.load_cert_chain(self._pki_dir / "apiserver.crt", self._pki_dir / "apiserver.key")
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=serving_tls)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)
        self.port = server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        for stream in self._streams:
            stream.silenced.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _record(self, request: web.Request, watch: bool, outcome: str, injected: bool) -> None:
        self.log.append(Passed(time.monotonic(), request.method, request.path, watch, outcome, injected))

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("1", "true")
        if self.probability and self._rng.random() < self.probability:
            fault = self._rng.choice(self.faults)
            self._record(request, watch, fault, True)
            return await self._inject(request, fault)
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP | {"host"}}
        body = await request.read()
        try:
            upstream = await self._session.request(
                request.method,
                f"{self.upstream}{request.path_qs}",
                headers=headers,
                data=body or None,
                allow_redirects=False,
            )
        except aiohttp.ClientError:
            self._record(request, watch, "upstream-unreachable", False)
            return self._reset(request)
        async with upstream:
            self._record(request, watch, str(upstream.status), False)
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    response.headers[name] = value
            if "Content-Encoding" in upstream.headers:
                response.headers["Content-Encoding"] = upstream.headers["Content-Encoding"]
            await response.prepare(request)
            if watch and upstream.status == 200:
                await self._relay_watch(upstream, response)
            else:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
            return response

    async def _relay_watch(self, upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
        stream = _Stream()
        self._streams.add(stream)
        try:
            chunks = upstream.content.iter_any().__aiter__()
            next_chunk: asyncio.Future[bytes] | None
            while True:
                next_chunk = asyncio.ensure_future(chunks.__anext__())
                silenced = asyncio.ensure_future(stream.silenced.wait())
                done, _ = await asyncio.wait({next_chunk, silenced}, return_when=asyncio.FIRST_COMPLETED)
                silenced.cancel()
                if next_chunk not in done:
                    break
                try:
                    chunk = next_chunk.result()
                except StopAsyncIteration:
                    return
                if stream.silenced.is_set():
                    stream.withheld += chunk
                    next_chunk = None
                    break
                await response.write(chunk)
            # Quiet from now on, the connection kept open until the client hangs up; what the API
            # server still sends is read and kept, never relayed.
            with contextlib.suppress(StopAsyncIteration, aiohttp.ClientError):
                if next_chunk is not None:
                    stream.withheld += await next_chunk
                async for chunk in chunks:
                    stream.withheld += chunk
            await asyncio.Event().wait()
        finally:
            self._streams.discard(stream)

    async def _inject(self, request: web.Request, fault: Fault) -> web.StreamResponse:
        if fault == "reset":
            return self._reset(request)
        code = int(fault)
        reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}.get(code, "")
        headers = {"Content-Type": "application/json"}
        if code == 429:
            headers["Retry-After"] = str(self.retry_after)
        message = f"injected by the fault proxy: {code}"
        return web.Response(status=code, body=_status(code, reason, message), headers=headers)

    def _reset(self, request: web.Request) -> web.StreamResponse:
        """Drop the connection with a TCP reset, as a crashed server or a middlebox would."""
        transport = request.transport
        if transport is not None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        raise web.HTTPServiceUnavailable  # never sent: the connection is gone
