"""Fingerprint probes for drift detection: HEAD for http(s), stat for local paths.

Every failure comes back as a typed, indeterminate ProbeOutcome; nothing raises.
"""

import asyncio
import os
import stat
from collections.abc import Sequence

import aiohttp

from llmkube.controllers.modelsource.oserrors import describe
from llmkube.kube.blocking import run_in_daemon_thread
from llmkube.plan.model import Fingerprint, ProbeFailure, ProbeOutcome
from llmkube.plan.model.bounds import INT64_MAX, bounded_etag
from llmkube.plan.model.egress import EgressPolicy
from llmkube.sources import EscapesRoots, PolicySource, open_beneath_roots, open_checked, refused

# A HEAD is tiny: a server that cannot answer within seconds is treated as unreachable, and the
# next revalidation tries again. `total` bounds redirects too.
DEFAULT_PROBE_TIMEOUT = aiohttp.ClientTimeout(total=10, sock_connect=5)
# Ask for the stored bytes: a compressed representation would report a different length and ETag.
IDENTITY_ENCODING = {"Accept-Encoding": "identity"}


def parse_content_length(value: str | None) -> int | None:
    """A Content-Length the API server can store (an int64), else None: a size of 10^30 bytes is
    not one, whatever the server says."""
    if value is None or not value.strip().isascii() or not value.strip().isdigit() or len(value) > 19:
        return None
    length = int(value)
    return length if length <= INT64_MAX else None


def default_policy() -> EgressPolicy:
    """The default policy, with no cluster knowledge (the controller passes its own)."""
    return EgressPolicy()


def _status_failure(method: str, url: str, status: int, reason: str | None) -> ProbeOutcome:
    if status == 404:
        kind = ProbeFailure.NOT_FOUND
    elif status in (401, 403):
        kind = ProbeFailure.UNAUTHORIZED
    elif status >= 500:
        kind = ProbeFailure.SERVER_ERROR
    else:
        kind = ProbeFailure.UNEXPECTED_STATUS
    return ProbeOutcome(failure=kind, detail=f"{method} {url}: {status} {reason or ''}".rstrip())


async def probe_http_fingerprint(
    session: aiohttp.ClientSession,
    url: str,
    *,
    client_timeout: aiohttp.ClientTimeout = DEFAULT_PROBE_TIMEOUT,
    policy: PolicySource = default_policy,
) -> ProbeOutcome:
    """HEAD `url` (following redirects, as a download would, each hop checked against `policy`):
    ETag and Content-Length of a 200. `client_timeout.total` bounds the whole chain of redirects."""
    try:
        async with (
            asyncio.timeout(client_timeout.total),
            open_checked(
                session, "HEAD", url, policy, headers=IDENTITY_ENCODING, client_timeout=client_timeout
            ) as response,
        ):
            if response.status != 200:
                return _status_failure("HEAD", url, response.status, response.reason)
            fingerprint = Fingerprint(
                etag=bounded_etag(response.headers.get("ETag") or None),
                content_length=parse_content_length(response.headers.get("Content-Length")),
            )
    except TimeoutError:
        return ProbeOutcome(
            failure=ProbeFailure.TIMEOUT, detail=f"HEAD {url}: no answer within {client_timeout.total}s"
        )
    except (aiohttp.ClientError, OSError) as error:
        denied = refused(error)
        if denied is not None:
            return ProbeOutcome(failure=ProbeFailure.NOT_ALLOWED, detail=denied.detail)
        return ProbeOutcome(failure=ProbeFailure.CONNECTION, detail=f"HEAD {url}: {error!r}")
    if not fingerprint.determinate:
        return ProbeOutcome(
            failure=ProbeFailure.NO_FINGERPRINT, detail=f"HEAD {url}: no ETag or Content-Length"
        )
    return ProbeOutcome(fingerprint=fingerprint)


def _stat_beneath(path: str, roots: Sequence[str]) -> os.stat_result:
    descriptor = open_beneath_roots(path, roots)
    try:
        return os.fstat(descriptor)
    finally:
        os.close(descriptor)


def probe_local_fingerprint_sync(path: str, roots: Sequence[str]) -> ProbeOutcome:
    """stat the source (opened without following a link out of `roots`). Only its size is compared:
    a same-size rewrite goes unnoticed (as upstream)."""
    try:
        info = _stat_beneath(path, roots)
    except EscapesRoots as error:
        return ProbeOutcome(failure=ProbeFailure.PERMISSION_DENIED, detail=f"{path}: {error.detail}")
    except (FileNotFoundError, NotADirectoryError) as error:
        return ProbeOutcome(failure=ProbeFailure.NOT_FOUND, detail=f"stat {path}: {describe(error)}")
    except PermissionError as error:
        return ProbeOutcome(failure=ProbeFailure.PERMISSION_DENIED, detail=f"stat {path}: {describe(error)}")
    except OSError as error:
        return ProbeOutcome(failure=ProbeFailure.IO_ERROR, detail=f"stat {path}: {describe(error)}")
    if not stat.S_ISREG(info.st_mode):
        return ProbeOutcome(failure=ProbeFailure.IO_ERROR, detail=f"{path} is not a regular file")
    fingerprint = Fingerprint(content_length=info.st_size)
    if not fingerprint.determinate:
        return ProbeOutcome(failure=ProbeFailure.NO_FINGERPRINT, detail=f"{path} is empty")
    return ProbeOutcome(fingerprint=fingerprint)


async def probe_local_fingerprint(path: str, roots: Sequence[str]) -> ProbeOutcome:
    # stat can block for seconds (or for ever) on a hung network filesystem: never wait for it.
    return await run_in_daemon_thread(probe_local_fingerprint_sync, path, roots)
