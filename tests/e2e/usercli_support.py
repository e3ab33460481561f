"""Run the real `llmkube` user commands as a person would: a separate process against the full
local control plane, its output captured from a pipe or from a pseudo-terminal."""

import asyncio
import os
import pty
import re
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def _env(kubeconfig: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    env["KUBECONFIG"] = str(kubeconfig)
    return env


async def llmkube(kubeconfig: Path, *args: str, module: str = "llmkube.cli", within: float = 120) -> Run:
    """`llmkube ARGS` (or `kubectl-llmkube ARGS` with module=llmkube.usercli) through pipes."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env=_env(kubeconfig),
    )
    out, err = await asyncio.wait_for(process.communicate(), within)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


def _run_in_terminal(kubeconfig: Path, args: tuple[str, ...], columns: int, within: float) -> Run:
    primary, secondary = pty.openpty()
    env = _env(kubeconfig) | {"TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": "50"}
    process = subprocess.Popen(
        [sys.executable, "-m", "llmkube.cli", *args],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
        close_fds=True,
    )
    os.close(secondary)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([primary], [], [], within)
            if not ready:
                process.kill()
                raise TimeoutError(f"llmkube {' '.join(args)} did not finish in {within}s")
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the terminal's other side is closed, the command is done
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(primary)
    code = process.wait(timeout=within)
    return Run(code, b"".join(chunks).decode(errors="replace"), "")


async def llmkube_in_terminal(kubeconfig: Path, *args: str, columns: int = 160, within: float = 120) -> Run:
    """`llmkube ARGS` on a pseudo-terminal: what a person sees, escape sequences included."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, _run_in_terminal, kubeconfig, args, columns, within)


def plain(text: str) -> str:
    return ANSI.sub("", text).replace("\r", "")


def row_of(text: str, name: str) -> dict[str, str]:
    """The row whose cells include `name`, keyed by header; columns are cut at the header's word
    positions, so a blank cell (QUEUE of a service that does not wait) reads as ""."""
    lines = [line for line in plain(text).splitlines() if line.strip()]
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    names = [header[s:e].strip() for s, e in bounds]
    for line in lines[1:]:
        cells = [line[s:e].strip() if s < len(line) else "" for s, e in bounds]
        if name in cells:
            return dict(zip(names, cells, strict=True))
    raise AssertionError(f"no row for {name} in:\n{text}")
