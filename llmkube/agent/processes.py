"""The server processes the agent starts: spawned in sessions of their own, so they outlive the
agent (a restarted agent adopts them, see state.py), with their output in a log file rather than a
pipe (a pipe would break, and the server with it, when the agent exits)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmkube.agent.host import process_fingerprint

#: the tail of a log read for the last lines a server wrote
_TAIL_BYTES = 16 * 1024
#: a log longer than this is cut to its last quarter (a long-running server logs every request)
LOG_LIMIT = 8 * 1024 * 1024


@dataclass
class ServerProcess:
    pid: int
    command: tuple[str, ...]
    port: int
    log_path: Path
    fingerprint: str
    #: our child (None: adopted from an agent that ran before; its exit status is not ours to read)
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def poll(self) -> tuple[int | None, int | None] | None:
        """(exit code, signal) once it ended, None while it runs. An adopted process that ended
        says (None, None): how is not known."""
        if self.popen is not None:
            code = self.popen.poll()
            if code is None:
                return None
            return (code, None) if code >= 0 else (None, -code)
        return None if process_fingerprint(self.pid) == self.fingerprint else (None, None)

    def send(self, signum: int) -> None:
        """Signal it, unless it is gone (for an adopted process: unless its pid is another's now)."""
        if self.popen is not None:
            if self.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.send_signal(signum)
            return
        if process_fingerprint(self.pid) == self.fingerprint:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send(signal.SIGTERM)

    def kill(self) -> None:
        self.send(signal.SIGKILL)

    def output_tail(self, lines: int = 12) -> list[str]:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                size = log.tell()
                log.seek(max(0, size - _TAIL_BYTES))
                tail = log.read().decode(errors="replace")
        except OSError:
            return []
        return [line for line in tail.splitlines() if line.strip()][-lines:]

    def trim_log(self, limit: int = LOG_LIMIT) -> None:
        """Keep the log bounded: the server appends (O_APPEND), so cutting the file in place is safe;
        a line written while it is cut may be lost, nothing else."""
        try:
            if os.path.getsize(self.log_path) <= limit:
                return
            with open(self.log_path, "r+b") as log:
                log.seek(-limit // 4, os.SEEK_END)
                keep = log.read()
                log.seek(0)
                log.truncate()
                log.write(keep)
        except OSError:
            return


def spawn(
    command: Sequence[str], log_path: Path, *, port: int, pass_fds: Sequence[int] = ()
) -> ServerProcess:
    """Start `command` in a session of its own, its output appended to `log_path` (a new file).
    Raises OSError when it cannot be started (a missing binary, for one)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the agent's signals (a Ctrl-C, its service manager's) are not its
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
    fingerprint = settled_fingerprint(process.pid, command, lambda: process.poll() is not None)
    return ServerProcess(process.pid, tuple(command), port, log_path, fingerprint, process)


def settled_fingerprint(
    pid: int, command: Sequence[str], ended: Callable[[], bool], *, within: float = 2.0
) -> str:
    """The fingerprint of a process just started with `command`, once its command line is there.

    Popen returns when the exec has closed its error pipe, but Linux closes a new program's
    close-on-exec descriptors before it lays out the program's arguments: read at once,
    /proc/<pid>/cmdline can still be empty. A fingerprint taken then never matches the process
    again, and the next agent takes its own server for gone (the node tier caught it on a busy
    machine). So it is read until it ends with `command` (or the process ended, or `within`: a
    few milliseconds at most in practice, on the agent's loop like the spawn itself)."""
    expected = " ".join(command).strip()
    deadline = time.monotonic() + within
    while True:
        fingerprint = process_fingerprint(pid) or ""
        if fingerprint.endswith(expected) or ended() or time.monotonic() >= deadline:
            return fingerprint
        time.sleep(0.002)


def adopt(
    pid: int, command: Sequence[str], port: int, log_path: Path, fingerprint: str
) -> ServerProcess | None:
    """The process a previous agent started, if it still runs (the same start time and command)."""
    found = process_fingerprint(pid) if fingerprint else None
    if found is None:
        return None
    # An agent before settled_fingerprint could record a Linux fingerprint taken before the
    # command line was there ("<boot>:<start>:"): the same process, if its command is the one recorded.
    early = fingerprint.endswith(":") and found == fingerprint + " ".join(command).strip()
    if found != fingerprint and not early:
        return None
    return ServerProcess(pid, tuple(command), port, log_path, fingerprint)
