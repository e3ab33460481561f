"""Fixtures the unit tests share."""

from collections.abc import AsyncIterator

import aiohttp
import pytest


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client for the loopback servers a test starts."""
    async with aiohttp.ClientSession() as client:
        yield client
