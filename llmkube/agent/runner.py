"""One server process of a service, supervised: the I/O half of `plan.agent.supervision`.

A Runner starts (or adopts) the process, probes it, restarts it after the backoff when it exits
(on a fresh port each time: a port someone took meanwhile is never retried), kills it when it
hangs, drains it when it is replaced, and stops it when told. It tells the agent whenever what it
would publish changes (`on_change`: the service is reconciled, and its slice written), and
announces what happened as Events (`announce`).

Its loop wakes when the state machine asks (`next_wakeup`), when asked to stop, and every
`EXIT_POLL` seconds to notice an exit (the agent never waits on its servers: it must be able to
leave them running when it exits itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path

import aiohttp
import structlog

from llmkube.agent import health
from llmkube.agent.host import free_port, process_rss
from llmkube.agent.processes import ServerProcess, spawn
from llmkube.agent.server_keys import read_key
from llmkube.plan.agent import supervision as sv
from llmkube.plan.agent.launch import api_key_file_of
from llmkube.plan.agent.rollout import DrainSettings, drained
from llmkube.plan.inferenceservice.metal import NO_FREE_PORT

log = structlog.get_logger("llmkube.agent.runner")

EXIT_POLL = 0.5
#: how long to wait before looking for a free port again
PORT_RETRY = 10.0
LOG_TRIM_EVERY = 60.0

Announce = Callable[[str, str, str], None]  # (type, reason, message)
CommandFor = Callable[[int], tuple[str, ...]]


class Runner:
    def __init__(
        self,
        key: str,
        command_for: CommandFor,
        *,
        identity: str,
        address: str,
        ports: range | None,
        ports_in_use: Callable[[], Collection[int]],
        logs_dir: Path,
        session: aiohttp.ClientSession,
        settings: sv.Settings,
        drain: DrainSettings,
        on_change: Callable[[], None],
        announce: Announce,
        on_restart: Callable[[], None],
        need: int,
        priority: int,
        protected: bool,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self.key = key
        self.identity = identity
        self.need = need
        self.priority = priority
        self.protected = protected
        self._command_for = command_for
        self._address = address
        self._ports = ports
        self._ports_in_use = ports_in_use
        self._logs_dir = logs_dir
        self._session = session
        self._settings = settings
        self._drain = drain
        self._on_change = on_change
        self._announce = announce
        self._on_restart = on_restart
        self._pass_fds = tuple(pass_fds)
        self.process: ServerProcess | None = None
        self.state: sv.Supervision | None = None
        #: why it cannot start (no free port), or ""
        self.blocked = ""
        self.stop_reason = ""
        self.started_at = time.monotonic()
        self._retire_from: float | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.done = asyncio.Event()
        self._last_trim = 0.0
        #: the model file it serves (fetch.ModelFile.identity), for the state file
        self.source_identity = ""

    # -- what the agent reads -------------------------------------------------------------------
    @property
    def port(self) -> int | None:
        return self.process.port if self.process is not None and self.state and self.state.running else None

    @property
    def phase(self) -> sv.Phase | None:
        return self.state.phase if self.state is not None else None

    @property
    def serving(self) -> bool:
        return self.phase is sv.Phase.SERVING

    @property
    def stopping(self) -> bool:
        return bool(self.stop_reason) or self.phase in (sv.Phase.STOPPING, sv.Phase.STOPPED)

    def endpoint(self) -> sv.EndpointConditions | None:
        return sv.endpoint_conditions(self.state) if self.state is not None else None

    def report(self) -> tuple[str, str] | None:
        if self.blocked:
            return NO_FREE_PORT, self.blocked
        if self.state is None:
            return None
        return sv.report(self.state, time.monotonic(), self._settings)

    def rss(self) -> int:
        if self.process is None or self.state is None or not self.state.running:
            return 0
        return process_rss(self.process.pid) or 0

    # -- what the agent asks ----------------------------------------------------------------------
    def start(self, adopted: ServerProcess | None = None) -> None:
        now = time.monotonic()
        if adopted is not None:
            self.process = adopted
            self.state = sv.adopted(now)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"server:{self.key}")

    def stop(self, reason: str) -> None:
        """Stop the server (SIGTERM, SIGKILL after the grace period); `done` is set once it is gone."""
        if not self.stop_reason:
            self.stop_reason = reason
            self._wake.set()

    def retire(self, switched_at: float) -> None:
        """It was replaced: stop once kube-proxy followed the slice and its requests are done."""
        if self._retire_from is None:
            self._retire_from = switched_at
            self._wake.set()

    def rebind(self, command_for: CommandFor, pass_fds: Sequence[int]) -> None:
        """The command (and descriptors) of its next restarts: an adopted server's recorded command
        names a descriptor of the agent that started it."""
        self._command_for = command_for
        self._pass_fds = tuple(pass_fds)

    async def abandon(self) -> None:
        """The agent exits and leaves the server running (the next agent adopts it)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- the loop ---------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            if self.process is None and not self._start_process(first=True):
                self._on_change()
            while True:
                if await self._step():
                    break
        finally:
            if self.state is not None and self.state.phase is sv.Phase.STOPPED:
                self.done.set()

    async def _step(self) -> bool:
        """One round: True once the runner is finished."""
        state = self.state
        assert state is not None
        now = time.monotonic()
        if self.stop_reason and state.phase not in (sv.Phase.STOPPING, sv.Phase.STOPPED):
            self.state = state = sv.stop(state, now, self._settings)
            if self.process is not None and state.phase is sv.Phase.STOPPING:
                self.process.terminate()
                log.info("stopping server", service=self.key, pid=self.process.pid, reason=self.stop_reason)
            self._on_change()
        if state.phase is sv.Phase.STOPPED:
            self._forget_log()
            self._on_change()
            return True
        if self.process is not None and state.running and (ended := self.process.poll()) is not None:
            self._exited(*ended, now)
            return self.state is not None and self.state.phase is sv.Phase.STOPPED and self._finish()
        if self._retire_from is not None and state.phase is sv.Phase.SERVING and not self.stop_reason:
            in_flight = None
            if now - self._retire_from >= self._drain.propagation and self.process is not None:
                key = read_key(api_key_file_of(self.process.command))
                in_flight = await health.in_flight(self._session, self._address, self.process.port, key)
            if drained(self._retire_from, time.monotonic(), in_flight, self._drain):
                self.stop("replaced by a server of the new spec")
                return False
        action = sv.due(state, now, self._settings)
        if action is sv.Action.PROBE and self.process is not None:
            ok = await health.healthy(self._session, self._address, self.process.port)
            before = state.phase
            self.state = sv.probed(state, ok, time.monotonic(), self._settings)
            if self.state.phase is not before:
                if self.state.phase is sv.Phase.SERVING and before is sv.Phase.STARTING:
                    waited = time.monotonic() - state.started_at
                    self._announce(
                        "Normal",
                        "ServerReady",
                        f"llama-server answers on port {self.process.port} (pid {self.process.pid}, "
                        f"ready {waited:.1f} s after it started)",
                    )
                self._on_change()
            return False
        if action is sv.Action.KILL and self.process is not None:
            why = sv.kill_reason(state, self._settings)
            self.state = sv.killed(state, why)
            log.warning("killing server", service=self.key, pid=self.process.pid, reason=why)
            self.process.kill()
            return False
        if action is sv.Action.FORCE_KILL and self.process is not None:
            log.warning("server did not stop in time: killing it", service=self.key, pid=self.process.pid)
            self.process.kill()
            self.state = replace(state, kill_at=None)
            return False
        if action is sv.Action.RESTART:
            self._start_process(first=False)
            self._on_change()
            return False
        if self.process is not None and now - self._last_trim >= LOG_TRIM_EVERY:
            self._last_trim = now
            self.process.trim_log()
        await self._sleep(sv.next_wakeup(self.state or state, self._settings), now)
        return False

    def _finish(self) -> bool:
        self._forget_log()
        self._on_change()
        return True

    async def _sleep(self, wakeup: float | None, now: float) -> None:
        delay = EXIT_POLL if wakeup is None else min(EXIT_POLL, max(0.0, wakeup - now))
        if self._retire_from is not None:
            delay = min(delay, EXIT_POLL)
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=delay)

    def _exited(self, code: int | None, signal_number: int | None, now: float) -> None:
        assert self.state is not None and self.process is not None
        output = self.process.output_tail()
        stopping = self.state.phase is sv.Phase.STOPPING
        self.state = sv.exited(
            self.state,
            code=code,
            signal_number=signal_number,
            stderr=output,
            now=now,
            settings=self._settings,
        )
        if stopping:
            log.info(
                "server stopped", service=self.key, pid=self.process.pid, code=code, signal=signal_number
            )
            return
        ended = self.state.last_exit
        described = ended.describe() if ended is not None else "llama-server ended"
        log.warning(
            "server exited",
            service=self.key,
            pid=self.process.pid,
            code=code,
            signal=signal_number,
            crashes=self.state.crashes,
        )
        self._announce("Warning", "BackOff", f"{described} (restart {self.state.restarts + 1})")
        self._on_change()

    def _start_process(self, *, first: bool) -> bool:
        now = time.monotonic()
        port = free_port(self._address, self._ports, set(self._ports_in_use()))
        if port is None:
            self.blocked = (
                f"no free port on {self._address} in {self._ports.start}-{self._ports.stop - 1} "
                f"(--server-ports) to start llama-server on; trying again in {PORT_RETRY:g} s"
                if self._ports is not None
                else f"no free port on {self._address}"
            )
            base = self.state or sv.started(now)
            self.state = replace(base, phase=sv.Phase.EXITED, restart_at=now + PORT_RETRY, since=now)
            log.warning("no free port for a server", service=self.key, address=self._address)
            return False
        self.blocked = ""
        command = self._command_for(port)
        old = self.process
        path = self._logs_dir / f"{self.key.replace('/', '_')}-{port}.log"
        try:
            process = spawn(command, path, port=port, pass_fds=self._pass_fds)
        except OSError as error:
            base = self.state or sv.started(now)
            self.state = sv.exited(
                replace(base, phase=sv.Phase.STARTING),
                code=None,
                signal_number=None,
                stderr=[f"cannot start {command[0]}: {error.strerror or error}"],
                now=now,
                settings=self._settings,
            )
            self._announce("Warning", "BackOff", f"cannot start {command[0]}: {error.strerror or error}")
            return False
        if old is not None and old.log_path != path:
            with contextlib.suppress(OSError):
                old.log_path.unlink()
        self.process = process
        self.state = sv.started(now) if first or self.state is None else sv.restarted(self.state, now)
        if not first:
            self._on_restart()
        log.info("server started", service=self.key, pid=process.pid, port=port, command=" ".join(command))
        return True

    def _forget_log(self) -> None:
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.log_path.unlink()
