"""Read the GGUF header of a remote file with HTTP Range requests, never the whole file.

The header (key/values, tensor infos) precedes the tensor data and is usually well under a few MiB
of a multi-GB file. We fetch a growing prefix (256 KiB, then doubling up to the reader's bound)
into a temp file, streamed in chunks (the process never holds a prefix in memory), and parse it
as the first bytes of a file of the size the server announced; a parse is trusted only once the
whole header lies inside the bytes actually fetched. A server that ignores Range (answers 200) is
hung up on at once: metadata is then simply unavailable.

The server is the model source's owner's, and may be hostile: every request goes through the
egress policy (llmkube/sources/egress.py), at most the bytes asked for are read whatever
the server announces, and a Content-Range no file can have (a total beyond an int64, a range
outside it) is an invalid answer, not a size to allocate.
"""

import asyncio
import contextlib
import os
import re
import tempfile
from dataclasses import dataclass

import aiohttp

from llmkube.controllers.modelsource.fingerprint import IDENTITY_ENCODING, default_policy
from llmkube.kube.blocking import run_in_daemon_thread
from llmkube.plan.model import HeaderFailure, RemoteHeader
from llmkube.plan.model.bounds import INT64_MAX
from llmkube.sources import (
    MAX_HEADER_BYTES,
    HeaderTooLargeError,
    IncompleteHeaderError,
    NotGGUFError,
    PolicySource,
    open_checked,
    read_gguf_metadata,
    refused,
)

INITIAL_PREFIX_BYTES = 256 * 1024
MAX_PREFIX_BYTES = MAX_HEADER_BYTES
# Per request: connecting and each read must make progress; the whole read has its own deadline.
DEFAULT_REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=10)
DEFAULT_DEADLINE_SECONDS = 30.0
#: Bodies are copied to the temp file in pieces of this size.
CHUNK_BYTES = 64 * 1024

# At most 19 digits: anything longer is beyond an int64 (and int() of a long enough string raises).
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d{1,19})-(\d{1,19})/(\d{1,19}|\*)\s*$")


@dataclass(frozen=True)
class HeaderReadOptions:
    initial_bytes: int = INITIAL_PREFIX_BYTES
    max_bytes: int = MAX_PREFIX_BYTES
    request_timeout: aiohttp.ClientTimeout = DEFAULT_REQUEST_TIMEOUT
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS
    temp_dir: str | None = None


class _Unavailable(Exception):
    def __init__(self, kind: HeaderFailure, detail: str, http_status: int | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.http_status = http_status


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


def checked_range(value: str | None, start: int, end: int) -> tuple[int, int, int]:
    """The (first, last, total) of a 206 answer to `bytes=start-end`, `last` cut to `end` (more
    than was asked for is never read). Raises _Unavailable for a Content-Range no file can have."""
    parsed = parse_content_range(value)
    if parsed is None or parsed[0] != start or parsed[1] < start:
        raise _Unavailable(
            HeaderFailure.INVALID_RESPONSE, f"unexpected Content-Range {value!r} for bytes={start}-{end}"
        )
    first, last, total = parsed
    if total is None:
        raise _Unavailable(HeaderFailure.UNKNOWN_SIZE, "Content-Range without a total size")
    if total > INT64_MAX or last >= total:
        raise _Unavailable(
            HeaderFailure.INVALID_RESPONSE, f"Content-Range {first}-{last}/{total} describes no file"
        )
    return first, min(last, end), total


class _Prefix:
    """The first bytes of the remote file, in a temp file written in order."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.length = 0

    def _append(self, chunk: bytes, at: int) -> None:
        with open(self.path, "r+b") as file:
            file.seek(at)
            file.write(chunk)

    async def append(self, chunk: bytes) -> None:
        await run_in_daemon_thread(self._append, chunk, self.length)
        self.length += len(chunk)


async def _fetch_range(
    session: aiohttp.ClientSession,
    url: str,
    start: int,
    end: int,
    options: HeaderReadOptions,
    policy: PolicySource,
    prefix: _Prefix,
) -> _Range:
    headers = {**IDENTITY_ENCODING, "Range": f"bytes={start}-{end}"}
    async with open_checked(
        session, "GET", url, policy, headers=headers, client_timeout=options.request_timeout
    ) as response:
        if response.status == 200:
            # The body is the whole model: hang up instead of reading it.
            response.close()
            raise _Unavailable(
                HeaderFailure.RANGES_UNSUPPORTED, f"GET {url}: server ignored Range (200, not 206)"
            )
        if response.status != 206:
            raise _Unavailable(
                HeaderFailure.HTTP_STATUS,
                f"GET {url}: {response.status} {response.reason or ''}".rstrip(),
                http_status=response.status,
            )
        try:
            first, last, total = checked_range(response.headers.get("Content-Range"), start, end)
        except _Unavailable as invalid:
            raise _Unavailable(invalid.kind, f"GET {url}: {invalid.detail}") from None
        expected = last - first + 1
        received = 0
        while received < expected:
            try:
                # Exactly the span asked for and announced, never more, whatever else the server sends.
                chunk = await response.content.readexactly(min(CHUNK_BYTES, expected - received))
            except asyncio.IncompleteReadError as error:
                raise _Unavailable(
                    HeaderFailure.TRUNCATED,
                    f"GET {url}: range body has {received + len(error.partial)} of {expected} bytes",
                ) from error
            await prefix.append(chunk)
            received += len(chunk)
        return _Range(first, last, total)


async def _read_prefix_until_parsed(
    session: aiohttp.ClientSession,
    url: str,
    prefix: _Prefix,
    options: HeaderReadOptions,
    policy: PolicySource,
) -> RemoteHeader:
    want = options.initial_bytes
    while True:
        span = await _fetch_range(session, url, prefix.length, want - 1, options, policy, prefix)
        try:
            metadata = await run_in_daemon_thread(
                read_gguf_metadata,
                prefix.path,
                valid_bytes=prefix.length,
                file_size=span.total,
                limit=options.max_bytes,
            )
        except HeaderTooLargeError as error:
            raise _Unavailable(
                HeaderFailure.HEADER_TOO_LARGE,
                f"{url}: GGUF header larger than {options.max_bytes} bytes ({error})",
            ) from error
        except IncompleteHeaderError as error:
            if prefix.length >= min(options.max_bytes, span.total):
                raise _Unavailable(
                    HeaderFailure.HEADER_TOO_LARGE,
                    f"{url}: GGUF header larger than {options.max_bytes} bytes ({error})",
                ) from error
            want = min(want * 2, options.max_bytes, span.total)
            continue
        except NotGGUFError as error:
            raise _Unavailable(HeaderFailure.NOT_GGUF, f"{url}: {error}") from error
        return RemoteHeader(metadata=metadata, bytes_fetched=prefix.length, file_size=span.total)


async def read_remote_gguf_metadata(
    session: aiohttp.ClientSession,
    url: str,
    options: HeaderReadOptions | None = None,
    *,
    policy: PolicySource = default_policy,
) -> RemoteHeader:
    """GGUF metadata of the file at `url`, or a typed reason why it is unavailable. Never raises
    (except CancelledError), never reads more than `options.max_bytes` of the body, never connects
    where `policy` refuses (NOT_ALLOWED).
    """
    options = options or HeaderReadOptions()
    try:
        descriptor, path = tempfile.mkstemp(dir=options.temp_dir, prefix=".gguf-header-", suffix=".part")
    except OSError as error:
        return RemoteHeader(failure=HeaderFailure.IO_ERROR, detail=f"temp file: {error}")
    os.close(descriptor)
    prefix = _Prefix(path)
    try:
        async with asyncio.timeout(options.deadline_seconds):
            return await _read_prefix_until_parsed(session, url, prefix, options, policy)
    except _Unavailable as unavailable:
        return RemoteHeader(
            failure=unavailable.kind,
            detail=unavailable.detail,
            bytes_fetched=prefix.length,
            http_status=unavailable.http_status,
        )
    except TimeoutError:
        return RemoteHeader(
            failure=HeaderFailure.TIMEOUT,
            detail=f"GET {url}: header not read in time",
            bytes_fetched=prefix.length,
        )
    except aiohttp.ClientPayloadError as error:
        return RemoteHeader(
            failure=HeaderFailure.TRUNCATED, detail=f"GET {url}: {error!r}", bytes_fetched=prefix.length
        )
    except (aiohttp.ClientError, OSError) as error:
        denied = refused(error)
        if denied is not None:
            return RemoteHeader(failure=HeaderFailure.NOT_ALLOWED, detail=denied.detail)
        if isinstance(error, aiohttp.ClientError):
            return RemoteHeader(
                failure=HeaderFailure.CONNECTION, detail=f"GET {url}: {error!r}", bytes_fetched=prefix.length
            )
        return RemoteHeader(
            failure=HeaderFailure.IO_ERROR, detail=f"temp file: {error}", bytes_fetched=prefix.length
        )
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
