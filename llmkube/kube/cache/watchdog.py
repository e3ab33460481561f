"""An inactivity watchdog for a watch stream: if nothing arrives for ``timeout`` seconds (of the
injected clock), the body of the ``async with`` is cancelled and :class:`WatchInactive` raised.

The socket read timeout already catches a dead TCP connection; this also catches a connection that
stays alive (a load balancer keeping its half open) without delivering events, as kopf users met:
https://github.com/nolar/kopf/issues/232, https://github.com/nolar/kopf/issues/810.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from llmkube.kube.clock import Clock

__all__ = ["WatchInactive", "Watchdog"]


class WatchInactive(Exception):
    pass


class Watchdog:
    def __init__(self, clock: Clock, timeout: float) -> None:
        self._clock = clock
        self._timeout = timeout
        self._last = clock.monotonic()
        self._fired = False
        self._guarded: asyncio.Task[object] | None = None
        self._dog: asyncio.Task[None] | None = None

    def touch(self) -> None:
        self._last = self._clock.monotonic()

    async def __aenter__(self) -> Watchdog:
        self._guarded = asyncio.current_task()
        self._last = self._clock.monotonic()
        self._dog = asyncio.get_running_loop().create_task(self._watch())
        return self

    async def _watch(self) -> None:
        while True:
            remaining = self._last + self._timeout - self._clock.monotonic()
            if remaining <= 0:
                self._fired = True
                assert self._guarded is not None
                self._guarded.cancel()
                return
            await self._clock.sleep(remaining)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        assert self._dog is not None and self._guarded is not None
        self._dog.cancel()
        if self._fired and exc_type is asyncio.CancelledError and self._guarded.uncancel() == 0:
            # Our cancellation (and nobody else's): turn it into an ordinary error.
            raise WatchInactive(f"no watch event for {self._timeout:.0f}s")
        return False
