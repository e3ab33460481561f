"""The Hugging Face Hub's file list of a repository, for a Model that names a quantization
(plan/model/hub_resolution.py chooses from it): one GET of the Hub's API, through the egress
policy like every request for a Model's source, bounded in time and in size before it is parsed,
and kept a while so that many Models of one repository (or one Model's retries) ask the Hub once.

Nothing raises: every failure is a typed `HubListing`. No token is sent (the controller reads no
Secret, docs/security.md): a private or gated repository's Model names its files in spec.files.
"""

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import aiohttp

from llmkube.plan.model import HubListing, ListingFailure
from llmkube.plan.model.hub_files import MAX_LISTING_BYTES, listed_files
from llmkube.sources import PolicySource, open_checked, read_bounded, refused

#: The Hub answers a file list in well under a second; `total` bounds redirects and the body too.
LISTING_TIMEOUT = aiohttp.ClientTimeout(total=20, sock_connect=5)
#: How long a list is believed, and a failure (a repository may gain its quantization, or appear).
LISTED_FOR_SECONDS = 300.0
FAILED_FOR_SECONDS = 30.0
#: At most this many repositories' lists are kept (the least recently used go first).
MAX_LISTINGS = 256
_STATUS_FAILURES = {
    404: ListingFailure.NOT_FOUND,
    401: ListingFailure.UNAUTHORIZED,
    403: ListingFailure.UNAUTHORIZED,
}


@dataclass
class ListingCache:
    """The lists of the last MAX_LISTINGS repositories asked for, each until it expires."""

    _entries: "OrderedDict[str, tuple[float, HubListing]]" = field(default_factory=OrderedDict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def _now(self) -> float:
        return time.monotonic()

    def get(self, url: str) -> HubListing | None:
        entry = self._entries.get(url)
        if entry is None:
            return None
        expires, listing = entry
        if self._now() >= expires:
            del self._entries[url]
            return None
        self._entries.move_to_end(url)
        return listing

    def put(self, url: str, listing: HubListing) -> None:
        ttl = FAILED_FOR_SECONDS if listing.failure is not None else LISTED_FOR_SECONDS
        self._entries[url] = (self._now() + ttl, listing)
        self._entries.move_to_end(url)
        while len(self._entries) > MAX_LISTINGS:
            self._entries.popitem(last=False)

    def lock(self, url: str) -> asyncio.Lock:
        """One request per repository at a time: the others find its answer here."""
        if len(self._locks) > MAX_LISTINGS:
            self._locks = {key: lock for key, lock in self._locks.items() if lock.locked()}
        return self._locks.setdefault(url, asyncio.Lock())


async def list_repository(
    session: aiohttp.ClientSession,
    url: str,
    policy: PolicySource,
    cache: ListingCache,
    *,
    client_timeout: aiohttp.ClientTimeout = LISTING_TIMEOUT,
) -> HubListing:
    """The repository's files as the Hub's API at `url` lists them (cached), or why not."""
    async with cache.lock(url):
        cached = cache.get(url)
        if cached is not None:
            return cached
        listing = await _fetch(session, url, policy, client_timeout)
        cache.put(url, listing)
        return listing


async def _fetch(
    session: aiohttp.ClientSession, url: str, policy: PolicySource, client_timeout: aiohttp.ClientTimeout
) -> HubListing:
    headers = {"Accept": "application/json"}
    try:
        async with (
            asyncio.timeout(client_timeout.total),
            open_checked(
                session, "GET", url, policy, headers=headers, client_timeout=client_timeout
            ) as response,
        ):
            if response.status != 200:
                failure = _STATUS_FAILURES.get(response.status, ListingFailure.UNEXPECTED_STATUS)
                return HubListing(
                    failure=failure, detail=f"GET {url}: {response.status} {response.reason or ''}".rstrip()
                )
            body = await read_bounded(response.content, MAX_LISTING_BYTES + 1)
    except TimeoutError:
        return HubListing(
            failure=ListingFailure.TIMEOUT, detail=f"GET {url}: no answer within {client_timeout.total}s"
        )
    except (aiohttp.ClientError, OSError) as error:
        denied = refused(error)
        if denied is not None:
            return HubListing(failure=ListingFailure.NOT_ALLOWED, detail=denied.detail)
        return HubListing(failure=ListingFailure.CONNECTION, detail=f"GET {url}: {error!r}")
    if len(body) > MAX_LISTING_BYTES:
        return HubListing(
            failure=ListingFailure.TOO_LARGE,
            detail=f"GET {url}: a file list longer than {MAX_LISTING_BYTES} bytes",
        )
    files = listed_files(body)
    if files is None:
        return HubListing(failure=ListingFailure.NOT_A_LISTING, detail=f"GET {url}: not the Hub's file list")
    return HubListing(files=tuple(files))
