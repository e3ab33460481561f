"""The whole controller in the test's own process and event loop: what the e2e, install, RBAC and
fault tests and the benchmarks run against a local cluster.

    async with controller_running(cluster.controller_kubeconfig, ControllersConfig()) as running:
        ...  # running.manager, running.controllers, running.requests (a RequestLog)

It is `llmkube controller` without the process around it: the same :class:`Manager` and
:func:`setup_controllers` with the :class:`ControllersConfig` given, leader election off unless
asked, no signal handlers, no logging set-up, no listening ports unless asked. On entry it waits
until the caches synced and the workers run (or the manager failed: its error is raised); on exit
it asks for a graceful shutdown and waits for it. What the tests read, the controller's own process
never pays for:

- ``running.requests``: every request of the controller's client (request_log.py);
- ``reconcile_log(controller)``: the reconciles each controller ran, per key, from the first one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmkube.controllers.setup import Controllers, ControllersConfig, setup_controllers
from llmkube.kube.control import Controller, Result
from llmkube.kube.rest import ApiClient
from llmkube.kube.types import ObjectKey
from llmkube.manager import Manager, ManagerConfig
from llmkube_testing.request_log import RequestLog

__all__ = [
    "ControllerHarness",
    "ReconcileLog",
    "controller_running",
    "controllers_of",
    "idle",
    "reconcile_log",
]

#: How the harness configures the manager unless the caller says otherwise.
_HARNESS_DEFAULTS: dict[str, Any] = {
    "metrics_bind_address": "0",
    "health_bind_address": "0",
    "configure_logging": False,
    "handle_signals": False,
    "graceful_shutdown_timeout": 10,
    # The controller's own namespace, as in a pod (POD_NAMESPACE): its ServiceAccount's, where its
    # Lease and the metal servers' master key live (the installed RBAC grants those there).
    "lease_namespace": "llmkube-system",
}


def _manager_config(kubeconfig: Path | str, **options: Any) -> ManagerConfig:
    """The manager's configuration in the harness: ``options`` (any ManagerConfig field) over its
    defaults (no ports, no signal handlers, no logging set-up, a 10 s graceful shutdown)."""
    return ManagerConfig(kubeconfig=kubeconfig, **{**_HARNESS_DEFAULTS, **options})


# -- counting reconciles -----------------------------------------------------------------------


class ReconcileLog:
    """The reconciles a controller ran, per key, counted as each starts: instrumentation around
    the real reconcile function (installed once per controller; it forwards every call unchanged)."""

    def __init__(self) -> None:
        self.counts: Counter[ObjectKey] = Counter()

    def __call__(self, key: ObjectKey) -> int:
        return self.counts[key]

    def total(self) -> int:
        return sum(self.counts.values())


def reconcile_log(controller: Controller) -> ReconcileLog:
    """The controller's reconcile log, installed on first use (the harness installs one on every
    controller before its workers start, so its counts begin with the first reconcile)."""
    existing = getattr(controller, "_testing_reconcile_log", None)
    if isinstance(existing, ReconcileLog):
        return existing
    found = ReconcileLog()
    inner = controller._reconcile

    async def counted(key: ObjectKey) -> Result | None:
        found.counts[key] += 1
        return await inner(key)

    controller._reconcile = counted
    controller._testing_reconcile_log = found  # type: ignore[attr-defined]
    return found


def controllers_of(controllers: Controllers) -> list[Controller]:
    """Every controller that runs (no PriorityClass controller when the installer owns them)."""
    found = [
        controllers.inference_services.controller,
        controllers.models.controller,
        controllers.metal_services.controller,
    ]
    if controllers.priority_classes is not None:
        found.append(controllers.priority_classes.controller)
    return found


async def idle(controllers: list[Controller], *, within: float = 30.0) -> None:
    """Wait until no controller has a key ready or in flight. After `enqueue(key)` this means a
    reconcile of `key` that started after the enqueue has finished."""
    deadline = time.monotonic() + within
    while any(len(c.queue) or c.queue.processing() for c in controllers):
        if time.monotonic() > deadline:
            busy = [c.name for c in controllers if len(c.queue) or c.queue.processing()]
            raise TimeoutError(f"controllers {busy} still busy after {within:.0f} s")
        await asyncio.sleep(0.05)


# -- the harness -------------------------------------------------------------------------------


@dataclass
class ControllerHarness:
    manager: Manager
    controllers: Controllers
    #: the configuration the controllers run with (hand it on to start the same controller again)
    config: ControllersConfig
    requests: RequestLog
    task: asyncio.Task[None]
    stop_timeout: float = 30.0
    _stopped: bool = field(default=False, repr=False)

    @property
    def client(self) -> ApiClient:
        return self.manager.client

    def mutating_requests(self, namespace: str | None = None) -> int:
        return self.requests.mutating_requests(namespace)

    async def idle(self, *, within: float = 30.0) -> None:
        """Every controller has nothing ready or in flight, and every Event recorded so far is
        written: what the reconciles that ran so far send, they have sent."""
        await idle(controllers_of(self.controllers), within=within)
        await self.manager.recorder.drain()

    async def stop(self) -> None:
        """Shut down gracefully and wait for it (once; exiting the context does it too)."""
        if not self._stopped:
            self._stopped = True
            await _shut_down(self.manager, self.task, self.stop_timeout)


async def _shut_down(manager: Manager, task: asyncio.Task[None], within: float) -> None:
    manager.request_shutdown()
    await asyncio.wait_for(task, timeout=within)


@contextlib.asynccontextmanager
async def controller_running(
    kubeconfig: Path | str,
    config: ControllersConfig,
    *,
    start_timeout: float = 60.0,
    stop_timeout: float = 30.0,
    **manager_options: Any,
) -> AsyncIterator[ControllerHarness]:
    """Run the controllers configured by ``config`` as the identity of ``kubeconfig`` until the
    block ends. ``manager_options`` are ManagerConfig fields (``namespace``, ``leader_election``,
    ``lease_namespace``, ``metrics_bind_address``, ...)."""
    requests = RequestLog()
    manager = Manager(_manager_config(kubeconfig, **manager_options), request_observer=requests)
    holder: list[Controllers] = []

    def setup(host: Manager) -> None:
        controllers = setup_controllers(host, config)
        for controller in controllers_of(controllers):
            reconcile_log(controller)
        holder.append(controllers)

    loop = asyncio.get_running_loop()
    task = loop.create_task(manager.run(setup), name="controller-harness")
    started = loop.create_task(manager.controllers_started.wait())
    try:
        done, _ = await asyncio.wait(
            {task, started}, timeout=start_timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        started.cancel()
    if task in done:  # it ended before the controllers started: say why
        task.result()
        raise RuntimeError("the manager stopped before its controllers started")
    if not done:
        with contextlib.suppress(Exception):
            await _shut_down(manager, task, stop_timeout)
        raise TimeoutError(f"the controllers did not start within {start_timeout:.0f} s: {manager.readyz()}")
    running = ControllerHarness(manager, holder[0], config, requests, task, stop_timeout)
    try:
        yield running
    finally:
        await running.stop()
