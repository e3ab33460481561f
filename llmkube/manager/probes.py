"""The process's HTTP endpoints (aiohttp.web): ``/healthz`` and ``/readyz`` on the health address,
``/metrics`` (Prometheus text format, or OpenMetrics when the scraper's Accept asks for it: the
default registry incl. process metrics, and the families rendered next to it, kube/exposition.py)
on the metrics one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import prometheus_client
import structlog
from aiohttp import web

from llmkube.kube.exposition import exposition_chunks, negotiate

__all__ = ["Check", "HttpEndpoints"]

#: a check returns the list of problems; empty means healthy
Check = Callable[[], list[str]]


log = structlog.get_logger("llmkube.manager.probes")


class HttpEndpoints:
    def __init__(self) -> None:
        self._runners: list[web.AppRunner] = []
        self.addresses: dict[str, tuple[str, int]] = {}

    @staticmethod
    def _check_handler(check: Check) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            problems = check()
            if problems:
                return web.Response(status=503, text="\n".join(problems) + "\n")
            return web.Response(text="ok\n")

        return handle

    @staticmethod
    async def _metrics(request: web.Request) -> web.StreamResponse:
        fmt = negotiate(request.headers.get("Accept"))
        response = web.StreamResponse(headers={"Content-Type": fmt.content_type})
        await response.prepare(request)
        for chunk in exposition_chunks(prometheus_client.REGISTRY, fmt):
            await response.write(chunk)
        await response.write_eof()
        return response

    async def serve_health(self, host: str, port: int, healthz: Check, readyz: Check) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._check_handler(healthz))
        app.router.add_get("/readyz", self._check_handler(readyz))
        await self._serve("health", app, host, port)

    async def serve_metrics(self, host: str, port: int) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        await self._serve("metrics", app, host, port)

    async def _serve(self, name: str, app: web.Application, host: str, port: int) -> None:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runners.append(runner)
        server = site._server
        sockets = getattr(server, "sockets", None) or ()
        bound = sockets[0].getsockname()[:2] if sockets else (host, port)
        self.addresses[name] = (str(bound[0]), int(bound[1]))
        log.info("listening", endpoint=name, address=self.url(name))

    def url(self, name: str) -> str:
        host, port = self.addresses[name]
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"

    async def close(self) -> None:
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
