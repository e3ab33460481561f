"""Read the GGUF header of a remote file with HTTP Range requests, never the whole file.

The header (key/values, tensor infos) precedes the tensor data and is usually well under a few MiB
of a multi-GB file. We fetch a growing prefix (256 KiB, then doubling up to a cap) into a *sparse*
temp file as long as the real file, so the maintained GGUFReader can parse it unmodified; a parse is
trusted only once the whole header lies inside the bytes actually fetched. A server that ignores
Range (answers 200) is hung up on at once: metadata is then simply unavailable.
"""

import asyncio
import contextlib
import os
import re
import tempfile
from dataclasses import dataclass

import aiohttp

from llmkube.controllers.modelsource.fingerprint import IDENTITY_ENCODING
from llmkube.controllers.modelsource.ggufheader import IncompleteHeaderError, NotGGUFError, read_gguf_metadata
from llmkube.kube.blocking import run_in_daemon_thread
from llmkube.plan.model import HeaderFailure, RemoteHeader

INITIAL_PREFIX_BYTES = 256 * 1024
MAX_PREFIX_BYTES = 32 * 1024 * 1024  # large-vocabulary models carry 5-15 MiB of tokenizer metadata
# Per request: connecting and each read must make progress; the whole read has its own deadline.
DEFAULT_REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=10)
DEFAULT_DEADLINE_SECONDS = 30.0

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$")


@dataclass(frozen=True)
class HeaderReadOptions:
    initial_bytes: int = INITIAL_PREFIX_BYTES
    max_bytes: int = MAX_PREFIX_BYTES
    request_timeout: aiohttp.ClientTimeout = DEFAULT_REQUEST_TIMEOUT
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS
    temp_dir: str | None = None


class _Unavailable(Exception):
    def __init__(self, kind: HeaderFailure, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class _Range:
    start: int
    end: int  # inclusive
    total: int


def parse_content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """`bytes 0-262143/4939212390` → (0, 262143, 4939212390); total None for `*`; None if malformed."""
    match = _CONTENT_RANGE.match(value or "")
    if match is None:
        return None
    start, end, total = match.groups()
    return int(start), int(end), None if total == "*" else int(total)


def _write_at(path: str, offset: int, data: bytes, total: int) -> None:
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(data)
        # Extending with truncate leaves a hole: no disk blocks for the multi-GB tail.
        if os.fstat(file.fileno()).st_size < total:
            file.truncate(total)


async def _fetch_range(
    session: aiohttp.ClientSession, url: str, start: int, end: int, client_timeout: aiohttp.ClientTimeout
) -> tuple[_Range, bytes]:
    headers = {**IDENTITY_ENCODING, "Range": f"bytes={start}-{end}"}
    async with session.get(url, headers=headers, timeout=client_timeout, allow_redirects=True) as response:
        if response.status == 200:
            # The body is the whole model: hang up instead of reading it.
            response.close()
            raise _Unavailable(
                HeaderFailure.RANGES_UNSUPPORTED, f"GET {url}: server ignored Range (200, not 206)"
            )
        if response.status != 206:
            raise _Unavailable(
                HeaderFailure.HTTP_STATUS, f"GET {url}: {response.status} {response.reason or ''}"
            )
        content_range = response.headers.get("Content-Range")
        parsed = parse_content_range(content_range)
        if parsed is None or parsed[0] != start or parsed[1] < start:
            raise _Unavailable(
                HeaderFailure.HTTP_STATUS,
                f"GET {url}: unexpected Content-Range {content_range!r} for bytes={start}-{end}",
            )
        first, last, total = parsed
        if total is None:
            raise _Unavailable(HeaderFailure.UNKNOWN_SIZE, f"GET {url}: Content-Range without a total size")
        if last >= total:
            raise _Unavailable(
                HeaderFailure.HTTP_STATUS, f"GET {url}: Content-Range {first}-{last} beyond {total}"
            )
        expected = last - first + 1
        try:
            # Exactly the announced span, never more, whatever else the server sends.
            body = await response.content.readexactly(expected)
        except asyncio.IncompleteReadError as error:
            raise _Unavailable(
                HeaderFailure.TRUNCATED, f"GET {url}: range body has {len(error.partial)} of {expected} bytes"
            ) from error
        return _Range(first, last, total), body


async def _read_prefix_until_parsed(
    session: aiohttp.ClientSession, url: str, path: str, options: HeaderReadOptions, progress: list[int]
) -> RemoteHeader:
    fetched = 0
    want = options.initial_bytes
    while True:
        span, body = await _fetch_range(session, url, fetched, want - 1, options.request_timeout)
        await run_in_daemon_thread(_write_at, path, span.start, body, span.total)
        fetched = span.end + 1
        progress[0] = fetched
        try:
            metadata = await run_in_daemon_thread(read_gguf_metadata, path, valid_bytes=fetched)
        except IncompleteHeaderError as error:
            if fetched >= options.max_bytes:
                raise _Unavailable(
                    HeaderFailure.HEADER_TOO_LARGE,
                    f"GGUF header larger than {options.max_bytes} bytes ({error})",
                ) from error
            want = min(want * 2, options.max_bytes, span.total)
            continue
        except NotGGUFError as error:
            raise _Unavailable(HeaderFailure.NOT_GGUF, f"{url}: {error}") from error
        return RemoteHeader(metadata=metadata, bytes_fetched=fetched)


async def read_remote_gguf_metadata(
    session: aiohttp.ClientSession, url: str, options: HeaderReadOptions | None = None
) -> RemoteHeader:
    """GGUF metadata of the file at `url`, or a typed reason why it is unavailable. Never raises
    (except CancelledError), never reads more than `options.max_bytes` of the body.
    """
    options = options or HeaderReadOptions()
    progress = [0]
    try:
        descriptor, path = tempfile.mkstemp(dir=options.temp_dir, prefix=".gguf-header-", suffix=".part")
    except OSError as error:
        return RemoteHeader(failure=HeaderFailure.IO_ERROR, detail=f"temp file: {error}")
    os.close(descriptor)
    try:
        async with asyncio.timeout(options.deadline_seconds):
            return await _read_prefix_until_parsed(session, url, path, options, progress)
    except _Unavailable as unavailable:
        return RemoteHeader(failure=unavailable.kind, detail=unavailable.detail, bytes_fetched=progress[0])
    except TimeoutError:
        return RemoteHeader(
            failure=HeaderFailure.TIMEOUT,
            detail=f"GET {url}: header not read in time",
            bytes_fetched=progress[0],
        )
    except aiohttp.ClientPayloadError as error:
        return RemoteHeader(
            failure=HeaderFailure.TRUNCATED, detail=f"GET {url}: {error!r}", bytes_fetched=progress[0]
        )
    except aiohttp.ClientError as error:
        return RemoteHeader(
            failure=HeaderFailure.CONNECTION, detail=f"GET {url}: {error!r}", bytes_fetched=progress[0]
        )
    except OSError as error:
        return RemoteHeader(
            failure=HeaderFailure.IO_ERROR, detail=f"temp file: {error}", bytes_fetched=progress[0]
        )
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
