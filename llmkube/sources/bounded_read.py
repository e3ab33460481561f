"""An answer's body read up to a bound: `StreamReader.read(n)` returns what has arrived (maybe a
few KiB of it), not n bytes, so a bounded read loops until the end or the bound."""

import aiohttp

_CHUNK = 64 * 1024


async def read_bounded(stream: aiohttp.StreamReader, limit: int) -> bytes:
    """The body, or its first `limit` bytes when it is longer (the caller compares the length)."""
    parts: list[bytes] = []
    size = 0
    while size < limit and (chunk := await stream.read(min(_CHUNK, limit - size))):
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)
