"""Scale to zero, performed: the router wakes a sleeping InferenceService backend and tells the
other routers (and the controller) when each backend last had a request. The decisions are
llmkube.plan.router.wake's; this module makes the two writes they call for:

* the wake: the backend's Deployment from 0 to 1 replica through its `scale` subresource (so an
  HPA, recreated by the controller once the service is awake, takes it from there). It is read
  first and written with the read's resourceVersion, only from 0: of several routers waking it at
  once, one write succeeds, the others get a conflict, read 1 and stop; one already scaled further
  by its HPA is never scaled down. The wake runs apart from the request that asked for it (a
  client that leaves does not cancel it), once per sleep per router (`WakeQueue`).
* the idle clock: `inference.llmkube.dev/last-request` on the InferenceService, a merge patch of
  that one annotation, when `ActivityClock.due` says (at most once per `--activity-interval` per
  service; never while nothing happens)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import structlog

from llmkube.api import constants as c
from llmkube.kube.errors import ApiError
from llmkube.kube.resource import DEPLOYMENTS, Resource
from llmkube.kube.rest import ApiClient, TransportError
from llmkube.plan.router import Backend, Join
from llmkube.router.state import RouterState

__all__ = ["INFERENCE_SERVICES", "ROUTER_FIELD_MANAGER", "Waker"]

log = structlog.get_logger("llmkube.router.waking")

INFERENCE_SERVICES = Resource(c.GROUP, c.VERSION, c.ISVC_PLURAL, c.ISVC_KIND)
ROUTER_FIELD_MANAGER = "llmkube-router"
_TRIES = 5


class Waker:
    def __init__(
        self, client: ApiClient | None, state: RouterState, *, wall: Callable[[], float] = time.time
    ) -> None:
        self.client = client
        self.state = state
        self.wall = wall
        self._poke = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._sharing: asyncio.Task[None] | None = None
        #: scale writes made (each a Deployment from 0 to 1), by InferenceService
        self.scaled: dict[str, int] = {}

    # -- what a request does --------------------------------------------------------------------

    def began(self, backend: Backend) -> None:
        """A request went to an InferenceService backend: activity on its idle clock (while it lasts)."""
        isvc = backend.inference_service
        sleeper = self.state.sleepers.get(isvc or "")
        if isvc and sleeper is not None and sleeper.marked:
            self.state.activity.began(isvc, self.wall())
            self._poke.set()

    def ended(self, backend: Backend) -> None:
        isvc = backend.inference_service
        sleeper = self.state.sleepers.get(isvc or "")
        if isvc and sleeper is not None and sleeper.marked:
            self.state.activity.ended(isvc, self.wall())

    def hold(self, backends: tuple[Backend, ...]) -> list[str]:
        """A request held for these sleeping backends: it joins their wake queues (the first one
        held makes the wake). Admission checked there is room; what it joined, to `release`."""
        joined = []
        for backend in backends:
            isvc = backend.inference_service
            if not isvc:
                continue
            joined_as = self.state.wakes.join(isvc, self.state.clock())
            if joined_as is Join.FULL:
                continue  # it fell asleep while the request waited, and its queue is full: not held
            joined.append(isvc)
            if joined_as is Join.WAKE:
                self._spawn(self._wake(isvc))
        return joined

    def release(self, joined: list[str]) -> None:
        for isvc in joined:
            self.state.wakes.leave(isvc)

    # -- the writes -----------------------------------------------------------------------------

    def start(self) -> None:
        if self.client is not None and self._sharing is None:
            self._sharing = asyncio.get_running_loop().create_task(self._share())

    async def stop(self) -> None:
        tasks = [*self._tasks, *([self._sharing] if self._sharing is not None else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._sharing = None

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _wake(self, isvc: str) -> None:
        """Its Deployment from 0 to 1 replica, unless someone already did (or its HPA went further)."""
        try:
            await self._scale_up(isvc)
        except Exception as error:  # a defect: logged; the next request after this wake tries again
            log.exception("wake failed", service=isvc, error=str(error))

    async def _scale_up(self, isvc: str) -> None:
        client, namespace = self.client, self.state.namespace
        if client is None:
            return
        started = time.perf_counter()
        for _ in range(_TRIES):
            try:
                scale = await client.request("GET", DEPLOYMENTS.object_path(isvc, namespace, "scale"))
                replicas = int((scale.get("spec") or {}).get("replicas") or 0)
                if replicas > 0:
                    log.info("already awake", service=isvc, replicas=replicas)
                    return
                version = (scale.get("metadata") or {}).get("resourceVersion")
                await client.patch(
                    DEPLOYMENTS,
                    isvc,
                    {"metadata": {"resourceVersion": version}, "spec": {"replicas": 1}},
                    namespace,
                    subresource="scale",
                    field_manager=ROUTER_FIELD_MANAGER,
                )
            except ApiError as error:
                if error.status == 409:
                    continue  # another router (or the controller) wrote it since: read again
                log.warning("wake failed", service=isvc, status=error.status, error=error.message)
                return
            except TransportError as error:
                log.warning("wake failed", service=isvc, error=str(error))
                await asyncio.sleep(1.0)
                continue
            self.scaled[isvc] = self.scaled.get(isvc, 0) + 1
            log.info("waking", service=isvc, write_seconds=round(time.perf_counter() - started, 3))
            return

    async def _share(self) -> None:
        activity = self.state.activity
        while True:
            now = self.wall()
            for isvc, at in activity.due(now):
                try:
                    wrote = await self._write_last_request(isvc, at)
                except Exception as error:  # a defect: logged, and the clock goes on
                    log.exception("last request not shared", service=isvc, error=str(error))
                    wrote = False
                # Not written: tried again after an interval, not at once.
                activity.written(isvc, at if wrote else float("-inf"), now)
            wait = activity.next_due(self.wall())
            self._poke.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait if wait is not None else None):
                    await self._poke.wait()

    async def _write_last_request(self, isvc: str, at: float) -> bool:
        assert self.client is not None
        stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {"metadata": {"annotations": {c.ANNOTATION_LAST_REQUEST: stamp}}}
        try:
            await self.client.patch(
                INFERENCE_SERVICES,
                isvc,
                patch,
                self.state.namespace,
                field_manager=ROUTER_FIELD_MANAGER,
            )
        except (ApiError, TransportError) as error:
            log.warning("last request not shared", service=isvc, error=str(error))
            return False
        return True
