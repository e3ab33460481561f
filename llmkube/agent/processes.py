"""The server processes the agent starts: spawned in sessions of their own, so they outlive the
agent (a restarted agent adopts them, see state.py), with their output in a log file rather than a
pipe (a pipe would break, and the server with it, when the agent exits)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
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
    # Popen returns once the exec happened, so the command line read here is the server's.
    fingerprint = process_fingerprint(process.pid) or ""
    return ServerProcess(process.pid, tuple(command), port, log_path, fingerprint, process)


def adopt(
    pid: int, command: Sequence[str], port: int, log_path: Path, fingerprint: str
) -> ServerProcess | None:
    """The process a previous agent started, if it still runs (the same start time and command)."""
    if not fingerprint or process_fingerprint(pid) != fingerprint:
        return None
    return ServerProcess(pid, tuple(command), port, log_path, fingerprint)
