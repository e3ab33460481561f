"""The controller process: one API client, shared informers, controllers, leader election,
health/readiness/metrics endpoints, signal handling and a bounded graceful shutdown.

A program registers its controllers in a ``setup`` function and hands it to :meth:`Manager.run`::

    async def setup(manager: Manager) -> None:
        services = manager.informer(ISVC)                       # shared, indexed cache
        services.add_index("model", by_field("spec", "modelRef"))
        manager.add_controller(
            "inferenceservice",
            reconcile,                                          # async (ObjectKey) -> Result | None
            watches=[
                Watch(ISVC, predicates=[generation_changed]),
                Watch(DEPLOYMENTS, enqueue_owner(ISVC), label_selector=MANAGED_BY_LLMKUBE),
            ],
            workers=4,
        )

    await Manager(ManagerConfig(leader_election=True)).run(setup)

``run`` connects, calls ``setup``, serves ``/healthz`` ``/readyz`` ``/metrics``, starts the informers
(they warm up while waiting for leadership), acquires the lease, waits for every cache to sync,
starts the workers, and runs until SIGTERM/SIGINT or :meth:`request_shutdown`; it then stops taking
work, lets in-flight reconciles finish, releases the lease and closes everything within
``graceful_shutdown_timeout``.  Losing the lease (before the workers start, while they run, or
while they drain) stops them at once, in-flight reconciles included, and raises
:class:`~llmkube.kube.leader.election.LeadershipLost` (exit and let Kubernetes restart the pod);
from the moment of the loss the client refuses every write (``ApiClient.write_guard``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import signal
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import prometheus_client
import structlog

from llmkube.kube.apply import Applier, recent_key
from llmkube.kube.blocking import DaemonThreadExecutor
from llmkube.kube.cache import Informer, Transform
from llmkube.kube.clock import Clock, RealClock
from llmkube.kube.control import Controller, Reconciler, Watch
from llmkube.kube.events import EventRecorder
from llmkube.kube.leader import LeaderElector, LeadershipLost
from llmkube.kube.queue import RateLimiter
from llmkube.kube.resource import Resource
from llmkube.kube.rest import ApiClient, RequestObserver, load_client_config
from llmkube.manager.config import ManagerConfig, parse_bind_address
from llmkube.manager.logs import configure_logging
from llmkube.manager.probes import HttpEndpoints

__all__ = ["CacheSyncTimeout", "Manager", "Setup"]

log = structlog.get_logger("llmkube.manager")

Setup = Callable[["Manager"], Awaitable[None] | None]


class CacheSyncTimeout(Exception):
    pass


@dataclass(frozen=True)
class _InformerKey:
    resource: Resource
    namespace: str | None
    label_selector: str | None
    field_selector: str | None


class Manager:
    def __init__(
        self,
        config: ManagerConfig | None = None,
        *,
        client: ApiClient | None = None,
        clock: Clock | None = None,
        request_observer: RequestObserver | None = None,
    ) -> None:
        self.config = config or ManagerConfig()
        self._client = client
        # Told about every request of the client `connect` opens (tests count with it; the
        # controller process passes none).
        self._request_observer = request_observer
        self._owns_client = client is None
        self._clock = clock or RealClock()
        self._informers: dict[_InformerKey, Informer] = {}
        self._controllers: dict[str, Controller] = {}
        self._tasks: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
        self._running_tasks: dict[str, asyncio.Task[None]] = {}
        self._applier: Applier | None = None
        self._recorder: EventRecorder | None = None
        self.elector: LeaderElector | None = None
        self.http = HttpEndpoints()
        self._shutdown = asyncio.Event()
        #: set once caches are synced and the workers run (handy for tests and embedding)
        self.controllers_started = asyncio.Event()
        self._frozen = False
        self._stopping = False
        self._signals_installed: list[signal.Signals] = []
        # Keep the exposition identical to controller-runtime's: no *_created series.
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

    # -- what setup() uses ----------------------------------------------------------------------

    @property
    def client(self) -> ApiClient:
        if self._client is None:
            raise RuntimeError("the manager is not connected yet (use it from setup() or after connect())")
        return self._client

    @property
    def applier(self) -> Applier:
        if self._applier is None:
            self._applier = Applier(self.client, self.config.field_manager)
        return self._applier

    @property
    def own_namespace(self) -> str:
        """The process's own namespace (its Lease's): where its own objects live."""
        return self.config.lease_namespace

    @property
    def recorder(self) -> EventRecorder:
        if self._recorder is None:
            self._recorder = EventRecorder(
                self.client, reporting_controller=self.config.event_reporter, clock=self._clock
            )
        return self._recorder

    async def connect(self) -> ApiClient:
        """Load the kubeconfig / in-cluster config and open the client (``run`` does this first)."""
        if self._client is None:
            config = await load_client_config(self.config.kubeconfig, self.config.context)
            self._client = ApiClient.from_config(config, clock=self._clock, observer=self._request_observer)
        return self._client

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        compact: bool = False,
    ) -> Informer:
        """The shared informer for this resource, scope and selectors (created on first use).

        ``namespace=None`` means the manager's namespace scope; cluster-scoped kinds have none.
        ``transform`` trims objects before they are cached and ``compact`` keeps them as JSON bytes
        (store.py); both only on creation: ask for them before any watch of the same informer (a
        second, different transform is a programming error)."""
        scope = (namespace or self.config.watch_namespace) if resource.namespaced else None
        key = _InformerKey(resource, scope, label_selector or None, field_selector or None)
        informer = self._informers.get(key)
        if informer is None:
            self._check_not_frozen("informer")
            informer = Informer(
                self.client,
                resource,
                namespace=scope,
                label_selector=key.label_selector,
                field_selector=key.field_selector,
                transform=transform,
                field_manager=self.config.field_manager,
                compact=compact,
                clock=self._clock,
                read_timeout=self.config.watch_read_timeout,
            )
            self._informers[key] = informer
            self._follow_for_applier(resource, informer)
        elif transform is not None and informer.transform is not transform:
            raise ValueError(f"the informer for {resource} already caches with another transform")
        return informer

    def _follow_for_applier(self, resource: Resource, informer: Informer) -> None:
        """Tell the applier of every change the cache sees, so that it can skip re-creating an
        object whose create has not reached the cache yet, and only that (recent_applies.py)."""
        recent = self.applier.recent
        name = str(resource)
        recent.follow(name)
        informer.add_key_listener(lambda key: recent.seen(recent_key(name, key)))

    def add_controller(
        self,
        name: str,
        reconcile: Reconciler,
        *,
        watches: Sequence[Watch],
        workers: int | None = None,
        reconcile_timeout: float | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> Controller:
        """Register a controller; every watch feeds its queue through a shared informer."""
        self._check_not_frozen("controller")
        if name in self._controllers:
            raise ValueError(f"a controller named {name!r} is already registered")
        if not watches:
            raise ValueError(f"controller {name!r} watches nothing")
        controller = Controller(
            name,
            reconcile,
            workers=workers or self.config.workers,
            clock=self._clock,
            rate_limiter=rate_limiter,
            reconcile_timeout=reconcile_timeout,
            kind=watches[0].resource.kind,  # the first watch is of what it reconciles
        )
        for watch in watches:
            informer = self.informer(
                watch.resource,
                namespace=watch.namespace,
                label_selector=watch.label_selector,
                field_selector=watch.field_selector,
            )
            informer.add_handler(controller.handler(watch.mapper, watch.predicates))
        self._controllers[name] = controller
        return controller

    def add_task(self, name: str, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """A long-running coroutine started with the controllers (so only on the leader, after the
        caches synced) and cancelled at shutdown, e.g. a periodic metrics refresher."""
        self._check_not_frozen("task")
        self._tasks[name] = task

    def controller(self, name: str) -> Controller:
        return self._controllers[name]

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def _check_not_frozen(self, what: str) -> None:
        if self._frozen:
            raise RuntimeError(f"register every {what} in setup(), before the manager starts")

    # -- health ---------------------------------------------------------------------------------

    def healthz(self) -> list[str]:
        """Problems that a restart would fix: a crashed informer, worker or task."""
        problems = []
        for informer in self._informers.values():
            task = informer._task
            if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
                problems.append(f"informer {informer.resource} crashed: {task.exception()!r}")
        if self.controllers_started.is_set() and not self._stopping:
            for name, controller in self._controllers.items():
                if not controller.running:
                    problems.append(f"controller {name} has no running workers")
        for name, task in self._running_tasks.items():
            if task.done() and not task.cancelled() and task.exception() is not None:
                problems.append(f"task {name} crashed: {task.exception()!r}")
        return problems

    def readyz(self) -> list[str]:
        """Ready once every cache synced, and as long as no watch keeps failing."""
        if self._stopping:
            return ["shutting down"]
        problems = []
        for informer in self._informers.values():
            where = f"{informer.resource} ({informer.namespace or 'all namespaces'})"
            if not informer.has_synced():
                problems.append(f"cache not synced: {where}")
            failing = informer.failing_for()
            if failing > self.config.watch_failure_tolerance:
                problems.append(
                    f"watch of {where} failing for {failing:.0f}s: {informer.reflector.last_error!r}"
                )
        return problems + self.healthz()

    @property
    def is_leader(self) -> bool:
        return self.elector.is_leader if self.elector is not None else not self.config.leader_election

    # -- running --------------------------------------------------------------------------------

    def request_shutdown(self) -> None:
        self._shutdown.set()

    async def run(self, setup: Setup | None = None) -> None:
        if self.config.configure_logging:
            configure_logging(self.config.log_level, self.config.log_format)
        # asyncio.run joins the default executor at exit without a timeout: calls made there by
        # code we do not control (aiohttp's DNS lookups) must not be able to hold up a shutdown.
        asyncio.get_running_loop().set_default_executor(DaemonThreadExecutor())
        await self.connect()
        try:
            if setup is not None:
                outcome = setup(self)
                if inspect.isawaitable(outcome):
                    await outcome
            self._frozen = True
            await self._serve_http()
            self._install_signal_handlers()
            for informer in self._informers.values():
                informer.start()  # warm the caches while (possibly) waiting for leadership
            self.recorder.start()
            await self._lead_and_work()
        finally:
            self._remove_signal_handlers()
            if self._owns_client and self._client is not None:
                await self._client.close()

    async def _lead_and_work(self) -> None:
        holding: asyncio.Task[None] | None = None
        try:
            if self.config.leader_election:
                self.elector = LeaderElector(
                    self.client,
                    namespace=self.config.lease_namespace,
                    name=self.config.lease_name,
                    timing=self.config.leader_timing,
                    clock=self._clock,
                )
                # From here on nothing is written without the lease (the elector's own Lease
                # requests excepted): not before we win it, not after we lose it.
                self.client.write_guard = self.elector.leadership
                if not await self._until_stopped(self.elector.acquire()):
                    return
                holding = asyncio.get_running_loop().create_task(self.elector.hold(), name="leader:hold")
            # A lease lost while the caches sync ends the run before any worker starts.
            if not await self._until_stopped(self._wait_for_caches(), holding):
                return
            if not self.is_leader:  # the lease ran out between two checks of the renew loop
                raise LeadershipLost("the leader lease ran out before the controllers started")
            # The caches are now the bulk of the heap and live long: move them out of the cyclic
            # GC's reach, or every full collection traverses them again (see
            # bench/bench_kube_informer.py: ~88 us/event during the initial burst, ~20 after).
            gc.collect()
            gc.freeze()
            for controller in self._controllers.values():
                controller.start()
            for name, task in self._tasks.items():
                self._running_tasks[name] = asyncio.get_running_loop().create_task(
                    task(), name=f"task:{name}"
                )
            self.controllers_started.set()
            log.info("controllers started", controllers=sorted(self._controllers), leader=self.is_leader)
            await self._until_stopped(self._wait_forever(), holding)
        finally:
            await self._graceful_stop(holding)

    async def _until_stopped(
        self, work: Coroutine[Any, Any, None], holding: asyncio.Task[None] | None = None
    ) -> bool:
        """Run ``work`` unless a shutdown comes first (then cancel it and return False) or the
        lease is lost first (then cancel it and raise :class:`LeadershipLost`)."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(work)
        shutdown = loop.create_task(self._wait_for_shutdown())
        waiting = {task, shutdown} | ({holding} if holding is not None else set())
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            shutdown.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if holding is not None and holding.done():
            holding.result()  # raises LeadershipLost
        if task.cancelled():
            return False
        task.result()
        return True

    async def _wait_for_shutdown(self) -> None:
        await self._shutdown.wait()

    async def _wait_forever(self) -> None:
        await asyncio.Event().wait()

    async def _wait_for_caches(self) -> None:
        try:
            async with asyncio.timeout(self.config.cache_sync_timeout):
                await asyncio.gather(*(informer.wait_for_sync() for informer in self._informers.values()))
        except TimeoutError:
            missing = [
                str(informer.resource) for informer in self._informers.values() if not informer.has_synced()
            ]
            raise CacheSyncTimeout(
                f"caches not synced within {self.config.cache_sync_timeout}s: {missing}"
            ) from None
        log.info("caches synced", informers=len(self._informers))

    def _lease_lost(self) -> bool:
        return self.elector is not None and self.elector.leadership.lost

    async def _graceful_stop(self, holding: asyncio.Task[None] | None) -> None:
        """Stop taking work, let reconciles finish, release the lease, close: all within the timeout.

        The lease is renewed while reconciles drain (a drain can outlast the renew deadline).  Once
        the lease is lost, before or during the drain, nothing waits any more: in-flight reconciles
        are cancelled (their writes are refused anyway) and queued Events dropped."""
        self._stopping = True
        deadline = self._clock.monotonic() + self.config.graceful_shutdown_timeout

        def remaining() -> float:
            return max(0.0, deadline - self._clock.monotonic())

        log.info("shutting down", grace=self.config.graceful_shutdown_timeout, lease_lost=self._lease_lost())
        for task in self._running_tasks.values():
            task.cancel()
        for task in self._running_tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        # Leave a little time for the lease release and for closing.
        await self._stop_controllers(0.0 if self._lease_lost() else max(0.0, remaining() - 2.0), holding)
        if self._recorder is not None:
            await self._recorder.stop(grace=0.0 if self._lease_lost() else min(1.0, remaining()))
        if holding is not None and not holding.done():
            holding.cancel()
        if holding is not None:
            with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
                await holding
        if self.elector is not None:
            # After a loss this only succeeds if nobody wrote the Lease since our last renewal (the
            # write carries its resourceVersion); then it hands over sooner.  Never wait long.
            bound = min(1.0, remaining()) if self._lease_lost() else max(0.5, remaining())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(bound):
                    await self.elector.release()
        await asyncio.gather(*(informer.stop() for informer in self._informers.values()))
        await self.http.close()
        gc.unfreeze()  # whatever the caches held is ordinary garbage from now on
        log.info("stopped")

    async def _stop_controllers(self, grace: float, holding: asyncio.Task[None] | None) -> None:
        async def stop_all() -> None:
            await asyncio.gather(*(controller.stop(grace=grace) for controller in self._controllers.values()))

        stopping = asyncio.get_running_loop().create_task(stop_all())
        if holding is not None and not holding.done():
            await asyncio.wait({stopping, holding}, return_when=asyncio.FIRST_COMPLETED)
            if not stopping.done():  # the lease was lost while reconciles drained
                log.warning("leader lease lost during shutdown: cancelling in-flight reconciles")
                for controller in self._controllers.values():
                    controller.abort()
        await stopping

    # -- process plumbing -----------------------------------------------------------------------

    async def _serve_http(self) -> None:
        health = parse_bind_address(self.config.health_bind_address)
        if health is not None:
            await self.http.serve_health(*health, healthz=self.healthz, readyz=self.readyz)
        metrics_address = parse_bind_address(self.config.metrics_bind_address)
        if metrics_address is not None:
            await self.http.serve_metrics(*metrics_address)

    def _install_signal_handlers(self) -> None:
        if not self.config.handle_signals or threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
            self._signals_installed.append(signum)

    def _on_signal(self, signum: signal.Signals) -> None:
        if self._shutdown.is_set():
            log.warning("second signal: exiting now", signal=signum.name)
            raise SystemExit(1)
        log.info("signal received: shutting down gracefully", signal=signum.name)
        self._shutdown.set()

    def _remove_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in self._signals_installed:
            loop.remove_signal_handler(signum)
        self._signals_installed.clear()
