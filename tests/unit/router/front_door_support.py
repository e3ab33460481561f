"""What the front-door tests measure a router by, from outside its process: its memory (RSS and its
high-water mark, from /proc), the bytes it read from its sockets (/proc's `rchar`), and how late its
event loop answers (`LoopProbe`: /healthz over a kept-alive connection, again and again, while the
test does its worst on other connections)."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[3]
MiB = 1 << 20


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def rss(pid: int) -> int:
    return _status(pid, "VmRSS")


def peak_rss(pid: int) -> int:
    return _status(pid, "VmHWM")


def reset_peak(pid: int) -> None:
    """The high-water mark starts again from the RSS now (clear_refs 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def bytes_read(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise KeyError("rchar")


@dataclass
class EdgeRouter:
    pid: int
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.asynccontextmanager
async def edge_router(
    spec: dict[str, Any],
    *,
    endpoints: dict[str, list[str]] | None = None,
    limits: dict[str, Any] | None = None,
) -> AsyncIterator[EdgeRouter]:
    """A router in its own process (tests/unit/router/edge_process.py), stopped when the block ends."""
    options = {"spec": spec, "endpoints": endpoints or {}, "limits": limits or {}}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.unit.router.edge_process",
        orjson.dumps(options).decode(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stdin is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        started = orjson.loads(line)
        yield EdgeRouter(int(started["pid"]), int(started["port"]))
    finally:
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()


@dataclass
class LoopProbe:
    """How late the router's loop answers: /healthz, one after another, over one kept-alive
    connection, while the test runs (`worst` and `count` once stopped)."""

    port: int
    latencies: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            while True:
                started = time.perf_counter()
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: r\r\n\r\n")
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(3)  # "ok\n"
                self.latencies.append(time.perf_counter() - started)
                await asyncio.sleep(0.005)
        finally:
            writer.close()

    def start(self) -> LoopProbe:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def stop(self) -> None:
        assert self._task is not None
        if self._task.done():
            self._task.result()  # the probe's own failure, if any
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    @property
    def worst(self) -> float:
        return max(self.latencies, default=float("inf"))


def send_until_answered(port: int, head: bytes, filler: bytes, total: int) -> tuple[bytes, int]:
    """Send `head`, then `filler` until `total` bytes went out or the server answered (or closed);
    (what it answered, bytes sent). Blocking: run in a thread."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setblocking(False)
    sent, answer = 0, b""
    pending = memoryview(head)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if not pending and sent < total:
                pending = memoryview(filler)
            readable, writable, _ = select.select([sock], [sock] if pending else [], [], 0.5)
            if readable:
                try:
                    data = sock.recv(65536)
                except ConnectionError:
                    break
                if not data:
                    break
                answer += data
                if b"\r\n\r\n" in answer:
                    break
            if writable and pending:
                try:
                    n = sock.send(pending)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    pending = memoryview(b"")
                    continue
                sent += n
                pending = pending[n:]
            if not pending and sent >= total and not readable:
                # Everything went out: wait a little for an answer, then give up.
                readable, _, _ = select.select([sock], [], [], 3)
                if not readable:
                    break
    finally:
        sock.close()
    return answer, sent


def nested_lists(size: int) -> bytes:
    """A chat body whose message content is `size` bytes of `[[],[],...]`."""
    count = size // 3
    lists = b"[" + b",".join([b"[]"] * count) + b"]"
    return b'{"model":"m","messages":[{"role":"user","content":' + lists + b"}]}"
