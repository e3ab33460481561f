"""Blocking work in stoppable daemon threads (llmkube/kube/blocking.py), and the rule that nothing
in llmkube runs blocking work in a thread that cannot be stopped or abandoned."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from llmkube.kube.blocking import (
    DaemonThreadExecutor,
    StopFlag,
    StopRequested,
    run_blocking,
    run_in_daemon_thread,
)

LLMKUBE = Path(__file__).resolve().parents[3] / "llmkube"


async def test_the_result_and_the_exception_reach_the_caller() -> None:
    assert await run_blocking(lambda flag: 6 * 7) == 42

    def fails(flag: StopFlag) -> None:
        raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        await run_blocking(fails)
    assert await run_in_daemon_thread(sum, [1, 2, 3]) == 6


async def test_cancelling_the_caller_stops_the_work_and_waits_for_its_cleanup() -> None:
    started, cleaned_up = threading.Event(), threading.Event()

    def chunks(flag: StopFlag) -> None:
        started.set()
        try:
            while True:
                flag.sleep(0.01)  # one chunk of work
        finally:
            time.sleep(0.2)  # e.g. removing a partial file
            cleaned_up.set()

    task = asyncio.create_task(run_blocking(chunks))
    while not started.is_set():  # noqa: ASYNC110 - a thread has no event to await
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned_up.is_set()  # the cancellation propagated only after the cleanup


async def test_a_second_cancellation_still_waits_for_the_cleanup() -> None:
    """Shutdown cancels a reconcile, and asyncio.run cancels what is still running when it ends: the
    second cancellation must not cut the first one's cleanup short (a partial model file was left
    behind when it did)."""
    started, cleaned_up = threading.Event(), threading.Event()

    def chunks(flag: StopFlag) -> None:
        started.set()
        try:
            while True:
                flag.sleep(0.01)
        finally:
            time.sleep(0.3)
            cleaned_up.set()

    task = asyncio.create_task(run_blocking(chunks))
    while not started.is_set():  # noqa: ASYNC110 - a thread has no event to await
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.sleep(0.05)  # the task is in its cleanup wait now
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned_up.is_set()


async def test_a_parent_flag_stops_every_child() -> None:
    parent = StopFlag()
    stopped: list[str] = []

    def until_stopped(flag: StopFlag) -> None:
        try:
            while True:
                flag.sleep(0.01)
        except StopRequested:
            stopped.append(threading.current_thread().name)
            raise

    works = [asyncio.create_task(run_blocking(until_stopped, parent=parent, name=f"w{i}")) for i in range(3)]
    await asyncio.sleep(0.05)
    parent.set()
    for work in works:
        with pytest.raises(StopRequested):
            await asyncio.wait_for(work, 5)
    assert sorted(stopped) == ["w0", "w1", "w2"]
    child = StopFlag(parent)
    assert child.is_set()
    with pytest.raises(StopRequested):
        child.check()


async def test_work_that_cannot_be_stopped_is_abandoned_not_waited_for() -> None:
    release = threading.Event()
    task = asyncio.create_task(run_in_daemon_thread(release.wait))  # e.g. stat() on a hung NFS mount
    await asyncio.sleep(0.05)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1.0
    release.set()


def test_a_hung_call_does_not_keep_the_process_alive() -> None:
    script = (
        "import asyncio, threading\n"
        "from llmkube.kube.blocking import run_in_daemon_thread\n"
        "async def main():\n"
        "    task = asyncio.create_task(run_in_daemon_thread(threading.Event().wait))\n"
        "    await asyncio.sleep(0.1)\n"
        "    task.cancel()\n"
        "asyncio.run(main())\n"
    )
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30)
    assert time.monotonic() - started < 10  # asyncio.to_thread would never return here


def test_no_blocking_work_runs_in_threads_that_cannot_be_stopped() -> None:
    """asyncio.to_thread / run_in_executor threads are joined at exit without a timeout: one hung
    or long call holds up a shutdown. Everything goes through llmkube.kube.blocking."""
    offenders = [
        f"{path.relative_to(LLMKUBE.parent)}:{number}"
        for path in sorted(LLMKUBE.rglob("*.py"))
        if path.name != "blocking.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\b(to_thread|run_in_executor)\(", line)
    ]
    assert offenders == []


async def test_the_daemon_default_executor_runs_calls_and_never_joins_them() -> None:
    executor = DaemonThreadExecutor()
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(executor, pow, 2, 10) == 1024
    with pytest.raises(ZeroDivisionError):
        await loop.run_in_executor(executor, divmod, 1, 0)
    hung = threading.Event()
    executor.submit(hung.wait)
    started = time.monotonic()
    executor.shutdown(wait=True)  # what asyncio.run does at exit: returns at once
    assert time.monotonic() - started < 0.5
    hung.set()
