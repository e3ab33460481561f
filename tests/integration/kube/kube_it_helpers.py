"""Small helpers shared by the kube integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def eventually(condition: Callable[[], bool], within: float = 20.0) -> None:
    """Poll state that only the API server can change (there is no local event to wait for)."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def eventually_async(check: Callable[[], Awaitable[bool]], within: float = 30.0) -> None:
    """Like :func:`eventually`, for checks that must ask the API server."""
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110
            await asyncio.sleep(0.2)
