"""The router's event loop: uvloop when it is installed (the image installs it), else asyncio's.

A relayed stream costs the router a socket receive and a send per chunk, and with asyncio's own
loop those calls are most of its CPU (bench/bench_router.py): uvloop's transports are written in C
over libuv and cut the router's CPU per stream by about a fifth. `--loop` chooses as uvicorn's flag
of that name does: `auto` (uvloop if importable), `uvloop` (required), `asyncio`."""

import asyncio
import importlib.util
from collections.abc import Callable

LOOPS = ("auto", "uvloop", "asyncio")


class LoopUnavailable(ValueError):
    """--loop=uvloop where uvloop is not installed."""


def loop_name(choice: str, *, uvloop_installed: bool) -> str:
    """Which loop `choice` means here: "uvloop" or "asyncio"."""
    if choice == "asyncio":
        return "asyncio"
    if uvloop_installed:
        return "uvloop"
    if choice == "uvloop":
        raise LoopUnavailable("--loop=uvloop: uvloop is not installed (pip install uvloop)")
    return "asyncio"


def loop_factory(choice: str) -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The chosen loop's name and a factory for asyncio.Runner."""
    name = loop_name(choice, uvloop_installed=importlib.util.find_spec("uvloop") is not None)
    if name == "uvloop":
        import uvloop

        return name, uvloop.new_event_loop
    return name, asyncio.new_event_loop
