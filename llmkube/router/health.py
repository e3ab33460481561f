"""Active health probes, for the backends whose spec asks for them (`healthCheck`): a GET of its
path on each ready endpoint of an InferenceService (or on an external backend's URL) every
`intervalSeconds`, within `timeoutSeconds`. A failed probe quarantines the endpoint like a failed
request; a passing one ends a quarantine at once. The probes follow the spec: a new one restarts
them."""

from __future__ import annotations

import asyncio

import structlog

from llmkube.plan.router import Backend, RouterConfig, upstream_url
from llmkube.router.http import AnswerBroken, ConnectionBroken
from llmkube.router.state import RouterState
from llmkube.router.upstream import Upstreams

log = structlog.get_logger("llmkube.router.health")


class Prober:
    def __init__(self, state: RouterState, upstreams: Upstreams) -> None:
        self.state = state
        self.upstreams = upstreams
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.probes = 0
        state.listeners.append(self.follow)

    def follow(self, config: RouterConfig) -> None:
        self.stop_all()
        for backend in config.backends.values():
            if backend.health_check is not None:
                self._tasks[backend.name] = asyncio.get_running_loop().create_task(
                    self._probe_forever(backend), name=f"probe:{backend.name}"
                )

    def stop_all(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self.stop_all()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _probe_forever(self, backend: Backend) -> None:
        check = backend.health_check
        assert check is not None
        while True:
            if backend.external:
                targets = [(backend.name, upstream_url(backend.url or "", check.path))]
            else:
                targets = [(e, f"http://{e}{check.path}") for e in self.state.endpoints_of(backend)]
            await asyncio.gather(*(self._probe(backend, key, url, check.timeout) for key, url in targets))
            await asyncio.sleep(check.interval)

    async def _probe(self, backend: Backend, key: str, url: str, within: float) -> None:
        self.probes += 1
        ok = await self._passes(backend, url, within)
        now = self.state.clock()
        if ok:
            self.state.quarantine.succeeded(key, now)
        else:
            if self.state.quarantine.usable(key, now):
                log.info("probe failed: quarantined", backend=backend.name, endpoint=key)
            self.state.quarantine.failed(key, now)

    async def _passes(self, backend: Backend, url: str, within: float) -> bool:
        answer = None
        try:
            async with asyncio.timeout(within):
                answer = await self.upstreams.send(url, "GET", (), external=backend.external)
                await answer.read()
            return answer.status < 400
        except (ConnectionBroken, AnswerBroken, OSError, TimeoutError):
            return False
        finally:
            if answer is not None:
                answer.close()
