"""One server process of a host agent, as a state machine: what it is doing, what to do next, when.

The agent's I/O layer reports what happened (the process started, a health probe answered or not,
the process exited) with the moment it happened on the agent's monotonic clock, carries out what
`due` asks (probe, kill, restart, force-kill), and wakes the machine at `next_wakeup`. Nothing
here reads a clock or touches a process.

    starting ──probe ok──▶ serving ──failure_threshold failed probes──▶ unhealthy ──probe ok──▶ serving
       │ no answer within                │ exit                           │ unhealthy for
       │ startup_timeout: kill           ▼                                │ unhealthy_restart_after: kill
       └──────────────────────────▶ exited ◀──────────────────────────────┘
                                      │ after backoff(crashes): restart (starting again)
    stop (any phase) ──▶ stopping ──exit──▶ stopped          (force-kill after stop_grace)

The crash count decides the backoff, as the kubelet's does for a container: the first crash is
restarted at once, then 5 s, 10 s, 20 s ... at most 5 minutes; a process that served for
`stable_after` (10 minutes) starts the count again. From the second crash in a row the service
is reported in CrashLoopBackOff, with the last lines the server wrote to stderr.
"""

import enum
import signal
from collections.abc import Sequence
from dataclasses import dataclass, replace

from llmkube.plan.inferenceservice.metal import (
    AGENT_RESTARTING,
    AGENT_STARTING,
    AGENT_UNHEALTHY,
    CRASH_LOOP_BACK_OFF,
)

#: how many of the server's last stderr lines a report quotes, and how long each may be
STDERR_LINES = 8
STDERR_LINE_LENGTH = 240


class Phase(enum.Enum):
    STARTING = "starting"
    SERVING = "serving"
    UNHEALTHY = "unhealthy"
    EXITED = "exited"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Action(enum.Enum):
    PROBE = "probe"  # GET /health
    KILL = "kill"  # SIGKILL a hung process (a startup timeout, failed probes): `killing` says why
    RESTART = "restart"  # start a new process
    FORCE_KILL = "force-kill"  # SIGKILL: it did not stop within the grace period


@dataclass(frozen=True)
class Settings:
    #: a large model can take minutes to load (mmap, mlock, warm-up)
    startup_timeout: float = 300.0
    startup_probe_interval: float = 1.0
    probe_interval: float = 5.0
    failure_threshold: int = 3
    unhealthy_restart_after: float = 60.0
    backoff_initial: float = 5.0
    backoff_max: float = 300.0
    stable_after: float = 600.0
    crash_loop_after: int = 2
    stop_grace: float = 10.0


@dataclass(frozen=True)
class Exit:
    code: int | None  # the exit status, None when a signal ended it
    signal: int | None
    stderr: tuple[str, ...]
    at: float
    #: why the agent killed it, when it did ("" when the process ended on its own)
    killed_because: str = ""

    def describe(self, program: str = "llama-server") -> str:
        if self.killed_because:
            how = f"{program} was stopped: {self.killed_because}"
        elif self.signal is not None:
            how = f"{program} was killed by signal {self.signal} ({_signal_name(self.signal)})"
        else:
            how = f"{program} exited with code {self.code}"
        lines = [line[:STDERR_LINE_LENGTH] for line in self.stderr[-STDERR_LINES:] if line.strip()]
        return f"{how}; its last output: " + " | ".join(lines) if lines else how


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True)
class Supervision:
    phase: Phase
    since: float  # when the current phase began
    started_at: float  # when the current process started
    crashes: int = 0  # consecutive exits (reset by a process that served for stable_after)
    restarts: int = 0  # every restart of the service's process, for the restart metric
    failed_probes: int = 0
    last_probe: float | None = None
    serving_since: float | None = None
    last_exit: Exit | None = None
    restart_at: float | None = None
    #: set when the agent killed the process (startup timeout, unhealthy): the exit's reason
    killing: str = ""
    kill_at: float | None = None  # stopping: when to force-kill

    @property
    def running(self) -> bool:
        """A process exists (or is being stopped)."""
        return self.phase in (Phase.STARTING, Phase.SERVING, Phase.UNHEALTHY, Phase.STOPPING)


def started(now: float) -> Supervision:
    """A process was just started for a service that had none."""
    return Supervision(Phase.STARTING, since=now, started_at=now)


def adopted(now: float) -> Supervision:
    """A process this agent started before it restarted: probed as if it were starting (it serves
    at once if it answers), its history unknown."""
    return started(now)


def restarted(state: Supervision, now: float) -> Supervision:
    """The process of a service that crashed (or was killed) was started again."""
    return replace(
        state,
        phase=Phase.STARTING,
        since=now,
        started_at=now,
        restarts=state.restarts + 1,
        failed_probes=0,
        last_probe=None,
        serving_since=None,
        restart_at=None,
        killing="",
        kill_at=None,
    )


def probed(state: Supervision, ok: bool, now: float, settings: Settings) -> Supervision:
    if not state.running or state.phase is Phase.STOPPING:
        return state
    if ok:
        if state.phase is Phase.SERVING:
            return replace(state, last_probe=now, failed_probes=0)
        return replace(
            state,
            phase=Phase.SERVING,
            since=now,
            last_probe=now,
            failed_probes=0,
            serving_since=state.serving_since if state.phase is Phase.UNHEALTHY else now,
        )
    failed = state.failed_probes + 1
    if state.phase is Phase.SERVING and failed >= settings.failure_threshold:
        return replace(state, phase=Phase.UNHEALTHY, since=now, last_probe=now, failed_probes=failed)
    return replace(state, last_probe=now, failed_probes=failed)


def exited(
    state: Supervision,
    *,
    code: int | None,
    signal_number: int | None,
    stderr: Sequence[str],
    now: float,
    settings: Settings,
) -> Supervision:
    """The process ended. Asked to stop: stopped. Otherwise a crash, restarted after the backoff."""
    ended = Exit(code, signal_number, tuple(stderr), now, state.killing)
    if state.phase in (Phase.STOPPING, Phase.STOPPED):
        return replace(state, phase=Phase.STOPPED, since=now, last_exit=ended, kill_at=None)
    served = state.serving_since is not None and now - state.serving_since >= settings.stable_after
    crashes = 1 if served else state.crashes + 1
    return replace(
        state,
        phase=Phase.EXITED,
        since=now,
        crashes=crashes,
        failed_probes=0,
        last_exit=ended,
        restart_at=now + backoff(crashes, settings),
        killing="",
        serving_since=None,
    )


def killed(state: Supervision, because: str) -> Supervision:
    """The agent is killing the process for `because`; its exit will say so."""
    return replace(state, killing=because)


def stop(state: Supervision, now: float, settings: Settings) -> Supervision:
    """Asked to stop (deleted, moved, scaled to zero, evicted, replaced by a new process)."""
    if state.phase in (Phase.STOPPING, Phase.STOPPED):
        return state
    if not state.running:  # exited: nothing to stop
        return replace(state, phase=Phase.STOPPED, since=now, restart_at=None)
    return replace(state, phase=Phase.STOPPING, since=now, kill_at=now + settings.stop_grace)


def backoff(crashes: int, settings: Settings) -> float:
    """Seconds before the restart after `crashes` consecutive crashes (1: at once)."""
    if crashes <= 1:
        return 0.0
    doublings: int = min(crashes - 2, 32)
    return min(settings.backoff_max, settings.backoff_initial * float(2**doublings))


def _probe_interval(state: Supervision, settings: Settings) -> float:
    return settings.probe_interval if state.phase is Phase.SERVING else settings.startup_probe_interval


def due(state: Supervision, now: float, settings: Settings) -> Action | None:
    """What to do now, if anything (at most one thing; ask again after doing it)."""
    phase = state.phase
    if phase is Phase.STOPPING:
        return Action.FORCE_KILL if state.kill_at is not None and now >= state.kill_at else None
    if phase is Phase.EXITED:
        return Action.RESTART if state.restart_at is not None and now >= state.restart_at else None
    if phase is Phase.STOPPED or state.killing:
        return None
    if phase is Phase.STARTING and now - state.since >= settings.startup_timeout:
        return Action.KILL
    if phase is Phase.UNHEALTHY and now - state.since >= settings.unhealthy_restart_after:
        return Action.KILL
    if state.last_probe is None or now - state.last_probe >= _probe_interval(state, settings):
        return Action.PROBE
    return None


def kill_reason(state: Supervision, settings: Settings) -> str:
    """Why `due` asked for a KILL (the message the exit will carry)."""
    if state.phase is Phase.STARTING:
        return f"it did not answer /health within {settings.startup_timeout:g} s"
    return (
        f"its /health failed {state.failed_probes} times in a row and it did not recover within "
        f"{settings.unhealthy_restart_after:g} s"
    )


def next_wakeup(state: Supervision, settings: Settings) -> float | None:
    """The moment `due` will next ask for something (None: only an event changes anything)."""
    phase = state.phase
    if phase is Phase.STOPPING:
        return state.kill_at
    if phase is Phase.EXITED:
        return state.restart_at
    if phase is Phase.STOPPED or state.killing:
        return None
    deadlines = [
        state.since + settings.startup_timeout if phase is Phase.STARTING else None,
        state.since + settings.unhealthy_restart_after if phase is Phase.UNHEALTHY else None,
        (state.last_probe + _probe_interval(state, settings))
        if state.last_probe is not None
        else state.since,
    ]
    return min(d for d in deadlines if d is not None)


@dataclass(frozen=True)
class EndpointConditions:
    """An EndpointSlice endpoint's conditions, as the EndpointSlice API defines them: `ready` is
    "serving and not terminating"; a draining process still serves what it has."""

    ready: bool
    serving: bool
    terminating: bool


def endpoint_conditions(state: Supervision) -> EndpointConditions | None:
    """The endpoint to publish for this process; None when there is no process to point at."""
    if state.phase is Phase.SERVING:
        return EndpointConditions(ready=True, serving=True, terminating=False)
    if state.phase is Phase.STOPPING:
        return EndpointConditions(ready=False, serving=True, terminating=True)
    if state.phase in (Phase.STARTING, Phase.UNHEALTHY, Phase.EXITED):
        return EndpointConditions(ready=False, serving=False, terminating=False)
    return None


def report(state: Supervision, now: float, settings: Settings) -> tuple[str, str] | None:
    """What the agent says about the service while this process does not serve (reason, message)."""
    phase, last = state.phase, state.last_exit
    if phase is Phase.STARTING:
        waited = max(0.0, now - state.since)
        if last is not None and state.crashes > 0:
            return (
                AGENT_RESTARTING,
                f"llama-server is starting again (restart {state.restarts}, {_crashes(state.crashes)}); "
                f"before: {last.describe()}",
            )
        return AGENT_STARTING, f"llama-server is loading the model ({waited:.0f} s)"
    if phase is Phase.UNHEALTHY:
        return (
            AGENT_UNHEALTHY,
            f"llama-server's /health failed {state.failed_probes} times in a row: its endpoint is "
            "withdrawn until it answers again",
        )
    if phase is Phase.EXITED and last is not None:
        wait = max(0.0, (state.restart_at or now) - now)
        restart = f"restarting in {wait:.0f} s" if wait >= 1 else "restarting now"
        message = f"{last.describe()} ({_crashes(state.crashes)}; {restart})"
        if state.crashes >= settings.crash_loop_after:
            return CRASH_LOOP_BACK_OFF, message
        return AGENT_RESTARTING, message
    return None


def _crashes(count: int) -> str:
    return "1 crash" if count == 1 else f"{count} crashes in a row"
