"""Blocking work (file copies, hashing, stat on a network filesystem) run from async code, in a way
that can be stopped and never holds up the process.

``asyncio.to_thread`` cannot do either: cancelling the awaiting task leaves the thread running to
the end, and at exit ``asyncio.run`` joins the default executor without a timeout (and the
interpreter joins executor threads again), so SIGTERM or a lost lease waited for a multi-GB copy to
finish while the next leader was already copying the same file.  Here:

* the work gets a :class:`StopFlag` and checks it between chunks; cancelling the awaiting task sets
  it and waits (briefly, ``cleanup_grace``) for the work to notice and clean up after itself;
* a flag can have a parent, so one ``set()`` stops every piece of work started under it (a
  controller stopping all its copies at shutdown);
* the work runs in a daemon thread: work that cannot be interrupted (a ``stat`` hung on NFS) is
  abandoned on cancellation and does not keep the process alive;
* :class:`DaemonThreadExecutor` does the same for the event loop's default executor, which code we
  do not control uses (aiohttp's DNS lookups: ``getaddrinfo`` against a resolver that never answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["DaemonThreadExecutor", "StopFlag", "StopRequested", "run_blocking", "run_in_daemon_thread"]

T = TypeVar("T")

DEFAULT_CLEANUP_GRACE = 5.0


class StopRequested(Exception):
    """Blocking work stopped early because it was asked to (its caller was cancelled, or the
    process is shutting down)."""


class StopFlag:
    """A thread-safe "please stop", optionally inheriting from a parent flag."""

    def __init__(self, parent: StopFlag | None = None) -> None:
        self._event = threading.Event()
        self._parent = parent

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set() or (self._parent is not None and self._parent.is_set())

    def check(self) -> None:
        """Raise :class:`StopRequested` if a stop was asked for (call it between chunks of work)."""
        if self.is_set():
            raise StopRequested("stop requested")

    def sleep(self, seconds: float) -> None:
        """Sleep (in the worker thread), waking early to raise :class:`StopRequested`."""
        # Poll in short steps so a parent's set() is seen too (it sets a different Event).
        remaining = seconds
        while remaining > 0:
            step = min(remaining, 0.05)
            if self._event.wait(step):
                break
            remaining -= step
            if self.is_set():
                break
        self.check()


async def run_blocking(
    work: Callable[[StopFlag], T],
    *,
    parent: StopFlag | None = None,
    cleanup_grace: float = DEFAULT_CLEANUP_GRACE,
    name: str = "blocking-work",
) -> T:
    """Run ``work(flag)`` in a daemon thread and return its result (or raise its exception).

    If the awaiting task is cancelled, ``flag`` is set and the work gets up to ``cleanup_grace``
    seconds to notice and clean up before the cancellation propagates; work still running after
    that is abandoned (it cannot keep the process alive)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    flag = StopFlag(parent)

    def deliver(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def target() -> None:
        result: T | None = None
        failure: BaseException | None = None
        try:
            result = work(flag)
        except BaseException as error:  # handed to the awaiting task, whatever it is
            failure = error
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for the result
            loop.call_soon_threadsafe(deliver, result, failure)

    threading.Thread(target=target, name=name, daemon=True).start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        flag.set()
        # Wait out the cleanup grace even if cancelled again meanwhile (shutdown cancels a reconcile,
        # then asyncio.run cancels whatever still runs): a second cancellation must not abandon the
        # work's cleanup (a partial model file) halfway.
        deadline = loop.time() + cleanup_grace
        while not done.done() and (left := deadline - loop.time()) > 0:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({done}, timeout=left)
        if done.done() and not done.cancelled():
            done.exception()  # retrieved: the work's StopRequested is expected, not an orphan error
        raise


async def run_in_daemon_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """For a blocking call that cannot check a flag (``stat``, ``scandir``, a small read): like
    ``asyncio.to_thread``, but cancelling the caller abandons the call instead of waiting for it,
    and the thread never holds up the process exit."""
    return await run_blocking(
        lambda _flag: function(*args, **kwargs),
        cleanup_grace=0.0,
        name=getattr(function, "__name__", "blocking-call"),
    )


class DaemonThreadExecutor(ThreadPoolExecutor):
    """An event loop default executor (``loop.set_default_executor``) running each call in its own
    daemon thread, and with nothing to join at shutdown: a call that hangs cannot hold up the exit.
    (A ThreadPoolExecutor subclass only because the loop accepts nothing else; no pool is used.)"""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as error:  # handed to whoever waits on the future
                future.set_exception(error)
            else:
                future.set_result(result)

        threading.Thread(target=run, name="default-executor", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None  # daemon threads end with the process; a hung one must not be waited for
