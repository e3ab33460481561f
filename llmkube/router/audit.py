"""Where audit lines go: the container's stdout (the cluster's log pipeline collects it) or a file
(`auditLog.filePath`, on a volume the controller mounts there). Lines written in one turn of the
event loop leave in one write; a sink that fails (a full disk) is reported once a minute and the
lines are dropped rather than held in memory."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import structlog

from llmkube.plan.router import Audit

log = structlog.get_logger("llmkube.router.audit")

#: lines held at most between two writes (a stalled stdout must not grow the heap)
MAX_PENDING = 10_000


class AuditSink:
    def __init__(self) -> None:
        self._fd: int | None = None
        self._path: str | None = None
        self._pending: list[bytes] = []
        self._scheduled = False
        self._last_complaint = float("-inf")
        self.dropped = 0

    def configure(self, audit: Audit) -> None:
        path = audit.path if audit.sink == "file" else None
        if path == self._path and (path is None or self._fd is not None):
            return
        self.close()
        self._path = path
        if path is not None:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            except OSError as error:
                self._complain(error)

    def write(self, line: bytes) -> None:
        if len(self._pending) >= MAX_PENDING:
            self.dropped += 1
            return
        self._pending.append(line)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        fd = self._fd if self._path is not None else sys.stdout.fileno()
        if fd is None:
            self.dropped += data.count(b"\n")
            return
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except BlockingIOError:
            self.dropped += 1
        except OSError as error:
            self.dropped += data.count(b"\n")
            self._complain(error)

    def _complain(self, error: OSError) -> None:
        now = time.monotonic()
        if now - self._last_complaint >= 60:
            self._last_complaint = now
            log.error("audit lines cannot be written", path=self._path or "stdout", error=str(error))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
