"""`llmkube controller` as a real OS process: its JSON-line log collected as it runs, signals, exit."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson


def controller_args(kubeconfig: Path, namespace: str, cache: Path, *extra: str) -> list[str]:
    return [
        "controller",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        "--log-format=json",
        f"--model-cache-path={cache}",
        # the tests keep their model files beside the cache
        f"--model-local-roots={cache.parent}",
        *extra,
    ]


class ControllerProcess:
    def __init__(self, name: str, args: list[str]) -> None:
        self.name = name
        self.args = args
        self.records: list[dict[str, Any]] = []
        self.other_output: list[str] = []
        self.process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> ControllerProcess:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "llmkube.cli",
            *self.args,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "POD_NAME": self.name},
        )
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        async for line in self.process.stderr:
            text = line.decode(errors="replace").rstrip()
            if text.startswith("{"):
                with contextlib.suppress(orjson.JSONDecodeError):
                    self.records.append(orjson.loads(text))
                    continue
            self.other_output.append(text)

    # -- what it said ---------------------------------------------------------------------------

    def logged(self, event: str) -> list[dict[str, Any]]:
        return [record for record in self.records if record.get("msg") == event]

    async def wait_for_log(self, event: str, within: float = 30.0) -> dict[str, Any]:
        async with asyncio.timeout(within):
            while not (found := self.logged(event)):
                if self.returncode is not None:
                    raise AssertionError(f"{self.name} exited ({self.returncode}) before logging {event!r}")
                await asyncio.sleep(0.05)
        return found[0]

    @property
    def identity(self) -> str:
        acquired = self.logged("acquired leader lease")
        assert acquired, f"{self.name} never acquired the lease"
        return str(acquired[0]["identity"])

    @staticmethod
    def time_of(record: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(str(record["ts"]).replace("Z", "+00:00"))

    def tail(self, lines: int = 30) -> str:
        shown = [orjson.dumps(record).decode() for record in self.records[-lines:]]
        return "\n".join([*shown, *self.other_output[-lines:]])

    # -- running --------------------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def send(self, signum: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    async def wait_exit(self, within: float) -> int:
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), within)
        if self._reader is not None:
            await asyncio.wait_for(self._reader, 5)
        return code

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 5)
