"""The router process: connect to the API server, watch the ModelRouter and its backends' slices,
serve the OpenAI API with /healthz, /readyz and /metrics on the same port, stop gracefully.

On SIGTERM the router stops being ready (the Service stops sending it new connections), keeps
answering for `drain_delay` seconds while that reaches every node, stops listening, and waits for
the requests in flight (streams included) for at most `shutdown_grace` seconds."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

import prometheus_client
import structlog

from llmkube.apimachinery.proxy import DIRECT, ProxyConfig
from llmkube.kube.exposition import exposition_chunks
from llmkube.kube.rest import ApiClient, load_client_config
from llmkube.plan.allowed_hosts import AllowedHost
from llmkube.plan.router import RouterConfig, errors
from llmkube.plan.router.wake import DEFAULT_ACTIVITY_INTERVAL, DEFAULT_WAKE_QUEUE, DEFAULT_WAKE_TIMEOUT
from llmkube.router.audit import AuditSink
from llmkube.router.health import Prober
from llmkube.router.http import ByteBudget, HttpServer, Limits
from llmkube.router.metrics import RouterMetrics
from llmkube.router.proxy import Proxy
from llmkube.router.secrets import SecretFiles
from llmkube.router.state import RouterState
from llmkube.router.upstream import Upstreams
from llmkube.router.waking import Waker
from llmkube.router.watches import RouterWatches

__all__ = ["RouterProcess", "RouterSettings"]

log = structlog.get_logger("llmkube.router")


@dataclass
class RouterSettings:
    name: str
    namespace: str
    kubeconfig: str | None = None
    host: str = "0.0.0.0"
    port: int = 8080
    secrets_dir: Path = field(default_factory=lambda: Path("/var/run/llmkube"))
    shutdown_grace: float = 30.0
    drain_delay: float = 2.0
    #: a stream that sends nothing for this long is cut off
    stream_idle_timeout: float = 600.0
    endpoint_wait: float = 30.0
    #: scale to zero (llmkube.plan.router.wake): the longest a request waits for a sleeping backend
    #: to wake, how many wait per backend, and how often the last request time is shared
    wake_timeout: float = DEFAULT_WAKE_TIMEOUT
    wake_queue: int = DEFAULT_WAKE_QUEUE
    activity_interval: float = DEFAULT_ACTIVITY_INTERVAL
    #: --external-hosts: where a backend with credentials may lead besides its provider's own host
    external_hosts: tuple[AllowedHost, ...] = ()
    #: HTTPS_PROXY / HTTP_PROXY / NO_PROXY: the proxy external providers are reached through
    proxy: ProxyConfig = DIRECT
    #: /readyz fails once a watch has failed this long
    watch_failure_tolerance: float = 120.0
    handle_signals: bool = True
    #: what the HTTP server holds its clients to (connections, timeouts, the body budget)
    limits: Limits = field(default_factory=Limits)
    #: the event loop it runs on (llmkube.router.event_loop), for its log
    loop: str = "asyncio"


def metrics_page() -> bytes:
    return b"".join(exposition_chunks(prometheus_client.REGISTRY))


def error_body(status: int, message: str) -> tuple[str, bytes]:
    """What the server answers by itself (a malformed request, a head too large), in OpenAI's shape."""
    return "application/json", errors.for_http(status, message).body()


def http_server(proxy: Proxy, limits: Limits | None = None) -> HttpServer:
    """The server of a router's proxy: its limit on bodies is the spec's, its own refusals (a
    malformed request, a head too large) are in OpenAI's shape like the proxy's, and the body budget
    is the proxy's (it holds what parsing a body costs in the same budget)."""
    return HttpServer(
        proxy.handle,
        body_limit=proxy.body_limit,
        error_body=error_body,
        limits=limits,
        body_budget=proxy.bodies,
    )


class RouterProcess:
    def __init__(self, settings: RouterSettings, *, client: ApiClient | None = None) -> None:
        self.settings = settings
        self._client = client
        self._owns_client = client is None
        self.state = RouterState(settings.name, settings.namespace, external_hosts=settings.external_hosts)
        self.metrics = RouterMetrics(settings.name)
        self.audit = AuditSink()
        self.state.listeners.append(lambda config: self.audit.configure(config.audit))
        self._stop = asyncio.Event()
        self.started = asyncio.Event()
        self.draining = False
        self.address: tuple[str, int] | None = None
        self.watches: RouterWatches | None = None
        self.upstreams: Upstreams | None = None
        self.proxy: Proxy | None = None
        self.waker: Waker | None = None

    @property
    def client(self) -> ApiClient:
        assert self._client is not None, "not connected"
        return self._client

    @property
    def config(self) -> RouterConfig | None:
        return self.state.config

    def ready(self) -> list[str]:
        if self.draining:
            return ["shutting down"]
        problems = []
        if self.watches is not None:
            problems += self.watches.problems(self.settings.watch_failure_tolerance)
        if self.state.config is None:
            loaded = self.state.loaded
            if self.state.deleted:
                problems.append("the ModelRouter was deleted")
            elif loaded is not None and loaded.refused:
                problems.append("the spec is invalid: " + "; ".join(i.text() for i in loaded.issues))
            else:
                problems.append("no spec loaded yet")
        return problems

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        settings = self.settings
        if self._client is None:
            self._client = ApiClient.from_config(await load_client_config(settings.kubeconfig))
        unregister = self.metrics.register_state(self.state)
        self.upstreams = Upstreams(stream_idle_timeout=settings.stream_idle_timeout, proxy=settings.proxy)
        self.watches = RouterWatches(self.client, self.state)
        self.state.wakes.bound = settings.wake_queue
        self.state.activity.interval = settings.activity_interval
        self.waker = Waker(self.client, self.state)
        prober = Prober(self.state, self.upstreams)
        self.proxy = Proxy(
            self.state,
            self.upstreams,
            self.metrics,
            self.audit,
            credentials=SecretFiles(settings.secrets_dir / "credentials"),
            server_keys=SecretFiles(settings.secrets_dir / "server-keys"),
            api_keys_root=settings.secrets_dir / "api-keys",
            ready=self.ready,
            metrics_page=metrics_page,
            endpoint_wait=settings.endpoint_wait,
            bodies=ByteBudget(settings.limits.body_budget),
            waker=self.waker,
            wake_timeout=settings.wake_timeout,
        )
        server = http_server(self.proxy, settings.limits)
        unregister_server = self.metrics.register_server(server)
        installed = self._install_signals()
        try:
            self.watches.start()
            self.waker.start()
            self.address = await server.start(settings.host, settings.port, backlog=1024)
            log.info(
                "listening",
                address=f"http://{self.address[0]}:{self.address[1]}",
                router=settings.name,
                loop=settings.loop,
            )
            self.started.set()
            await self._stop.wait()
            await self._drain(server)
        finally:
            self._remove_signals(installed)
            await prober.stop()
            await self.proxy.stop_shadows()
            await self.waker.stop()
            await server.close()
            await self.watches.stop()
            await self.upstreams.close()
            self.audit.flush()
            self.audit.close()
            unregister()
            unregister_server()
            if self._owns_client:
                await self.client.close()
            log.info("stopped")

    async def _drain(self, server: HttpServer) -> None:
        assert self.proxy is not None
        self.draining = True
        log.info("draining", in_flight=self.proxy.in_flight, grace=self.settings.shutdown_grace)
        await asyncio.sleep(self.settings.drain_delay)
        server.stop_listening()
        server.end_connections()  # idle ones now, the others once their answer is out
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, self.settings.shutdown_grace - self.settings.drain_delay)):
                await self.proxy.idle.wait()
        if self.proxy.in_flight:
            log.warning(
                "requests still in flight at the end of the grace period", in_flight=self.proxy.in_flight
            )

    def _install_signals(self) -> list[signal.Signals]:
        if not self.settings.handle_signals or threading.current_thread() is not threading.main_thread():
            return []
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.request_stop)
        return [signal.SIGTERM, signal.SIGINT]

    @staticmethod
    def _remove_signals(installed: list[signal.Signals]) -> None:
        loop = asyncio.get_running_loop()
        for signum in installed:
            loop.remove_signal_handler(signum)
