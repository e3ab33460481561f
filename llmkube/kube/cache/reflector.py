"""The reflector: LIST, then WATCH from the list's resourceVersion, forever (client-go
``tools/cache/reflector.go``).

* LIST pages of 500 with a consistent read (RV "") at first (RV "0" is served whole from the watch
  cache, the limit ignored); later relists ask for the last RV we synced to (served
  from the watch cache, unpaged) and fall back to a quorum read (RV "") when that is Expired or
  "too large" (the server has not reached it: etcd restored from a backup, a lagging cache).
* WATCH with ``allowWatchBookmarks``, a random 300-600 s ``timeoutSeconds``, a socket read
  timeout and an inactivity watchdog; a normal close re-watches from the last RV at once.
* 410 Expired (HTTP or ERROR event) goes back to LIST; a too-large RV goes back to a quorum LIST at
  once (retrying it would wait for an RV that may never come); 429 backs off and re-watches; a watch that
  ends in under a second without events is a failure.  Failures back off 0.8 s .. 30 s with
  jitter; the backoff resets after two healthy minutes.
* 404 on a LIST or WATCH means the API server does not serve the resource at all (a namespace
  that does not exist lists empty): a CustomResourceDefinition deleted, or not yet re-applied.
  client-go backs that off like any failure, up to 30 s, so a CRD re-applied after a few seconds
  was served again only after the next long step (9.9 s measured). A 404 costs the server no
  storage read, so the reflector asks again every 1-2 s until the resource is back.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
import structlog

from llmkube.kube.backoff import Backoff
from llmkube.kube.cache.lines import LineSplitter, LineTooLong
from llmkube.kube.cache.store import Listed
from llmkube.kube.cache.watchdog import Watchdog, WatchInactive
from llmkube.kube.clock import Clock, RealClock
from llmkube.kube.errors import (
    ApiError,
    Expired,
    NotFound,
    TooManyRequests,
    error_from_status,
    is_resource_version_too_large,
)
from llmkube.kube.resource import Resource
from llmkube.kube.rest import ApiClient, RequestTimeout, TransportError
from llmkube.kube.types import Obj

__all__ = [
    "Reflector",
    "ReflectorSink",
    "ReflectorStats",
    "VeryShortWatch",
    "advance_rv",
    "relist_rv",
    "resource_version_unavailable",
]

log = structlog.get_logger("llmkube.kube.cache.reflector")


def absent_resource_backoff(rng: random.Random) -> Backoff:
    """Retries while the resource is not served (404): 0.8 s, then every 1-2 s (jittered)."""
    return Backoff(initial=0.8, cap=1.0, rng=rng)


class VeryShortWatch(Exception):
    """The watch closed within a second without delivering anything (client-go's VeryShortWatchError)."""


class ReflectorSink(Protocol):
    def listed(self, obj: Obj) -> Listed:
        """One object of a LIST page (already transformed) in the form the sink keeps: the reflector
        holds only these until the LIST is complete, never every object of it as a dict."""
        ...

    def replace_listed(self, listed: list[Listed], resource_version: str) -> None:
        """A complete LIST result (the store becomes exactly this)."""
        ...

    def watch_event(self, event_type: str, obj: Obj) -> None:
        """One ADDED / MODIFIED / DELETED watch event (already transformed)."""
        ...


def relist_rv(last_synced: str | None, unavailable: bool) -> str:
    """Which resourceVersion a LIST asks for (client-go ``relistResourceVersion``)."""
    if unavailable:
        return ""  # the RV we had is gone: a consistent read from etcd
    if last_synced is None:
        # First list: a consistent read. "0" (any freshness) would be served from the watch cache
        # whole, ignoring the page limit (kube-apiserver v1.37): one document of every object of
        # the kind, parsed at once. "" is paged, and since consistent reads from the cache (v1.31+)
        # served from the watch cache too.
        return ""
    return last_synced  # "at least as fresh as what we had": never goes back in time


def resource_version_unavailable(error: BaseException) -> bool:
    """The RV we asked for cannot be served: compacted away (410 Expired) or not reached yet
    (``ResourceVersionTooLarge``).  Either way only a quorum read moves us forward."""
    return isinstance(error, Expired) or is_resource_version_too_large(error)


def list_page_size(resource_version: str, paginated_before: bool, page_size: int) -> int:
    """RV "0" and "" lists are paged; an exact-RV relist is not, so the watch cache can serve it
    (paging would force an etcd read: the thundering herd after an apiserver restart)."""
    if paginated_before or resource_version in ("", "0"):
        return page_size
    return 0


def advance_rv(
    current: str, event_type: str, event_rv: str | None, *, started_from: str, seen_non_added: bool
) -> tuple[str, bool]:
    """The RV to resume from after an event, and whether a non-ADDED event has been seen.

    A watch started from "" or "0" begins with synthetic ADDED events in no particular RV order;
    resuming from one of them could skip others, so the RV only advances once something else came.
    """
    seen = seen_non_added or event_type != "ADDED"
    if not event_rv:
        return current, seen
    if started_from in ("", "0") and not seen:
        return current, seen
    return event_rv, seen


@dataclass
class ReflectorStats:
    lists: int = 0
    #: LIST responses read (pages, continue pages included)
    list_pages: int = 0
    relists_after_expired: int = 0
    quorum_relists: int = 0
    watches: int = 0
    bookmarks: int = 0
    failures: int = 0
    #: a WATCH is open right now (the server accepted it; it has not ended)
    watching: bool = False


class Reflector:
    def __init__(
        self,
        client: ApiClient,
        resource: Resource,
        sink: ReflectorSink,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        page_size: int = 500,
        min_watch_timeout: float = 300.0,
        read_timeout: float = 90.0,
        inactivity_timeout: float = 120.0,
        list_timeout: float = 60.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._sink = sink
        self._transform = transform
        self._clock = clock or RealClock()
        self._rng = rng or random.Random()
        self._page_size = page_size
        self._min_watch_timeout = min_watch_timeout
        self._read_timeout = read_timeout
        self._inactivity_timeout = inactivity_timeout
        self._list_timeout = list_timeout
        self._backoff = backoff or Backoff(rng=self._rng)
        self._absent_backoff = absent_resource_backoff(self._rng)
        self.last_sync_rv: str | None = None
        self._rv_unavailable = False
        self._paginated_before = False
        #: monotonic time of the first failure of the current failure streak (None while healthy)
        self.failing_since: float | None = None
        self.last_error: BaseException | None = None
        self.stats = ReflectorStats()
        self._log = log.bind(resource=str(resource), namespace=namespace or "", selector=label_selector or "")

    # -- the outer loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled, backing off between failed attempts."""
        while True:
            backoff = self._backoff
            try:
                await self.list_and_watch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed(exc)
                if isinstance(exc, NotFound):
                    backoff = self._absent_backoff
            await self._clock.sleep(backoff.next_delay(self._clock.monotonic()))

    async def list_and_watch(self) -> None:
        await self.relist()
        while True:
            try:
                await self.watch_once()
            except Expired as exc:
                # Relist with the last synced RV first ("at least as fresh"): usually served by
                # the watch cache; only an Expired LIST falls back to a quorum read.
                self._log.info("watch expired, relisting", error=exc.message)
                self.stats.relists_after_expired += 1
                return
            except TooManyRequests as exc:
                self._failed(exc)
                delay = max(exc.retry_after or 0.0, self._backoff.next_delay(self._clock.monotonic()))
                await self._clock.sleep(delay)
            except TransportError as exc:  # could not connect: back off, then re-watch
                self._failed(exc)
                await self._clock.sleep(self._backoff.next_delay(self._clock.monotonic()))
            except ApiError as exc:
                if not is_resource_version_too_large(exc):
                    raise
                # The server has not reached our RV (and may never: etcd restored from a backup).
                # Asking again for the same RV would wait for ever; relist from etcd instead.
                self._log.info("watch resourceVersion too large, relisting from etcd", error=exc.message)
                self._rv_unavailable = True
                return

    # -- LIST -----------------------------------------------------------------------------------

    async def relist(self) -> None:
        rv = relist_rv(self.last_sync_rv, self._rv_unavailable)
        if self._rv_unavailable:
            self.stats.quorum_relists += 1
        try:
            items, list_rv = await self._list_pages(rv)
        except ApiError as exc:
            if rv == "" or not resource_version_unavailable(exc):
                raise
            self._log.info(
                "list resourceVersion unavailable, relisting from etcd",
                resource_version=rv,
                reason=exc.reason,
            )
            self._rv_unavailable = True
            self.stats.quorum_relists += 1
            items, list_rv = await self._list_pages("")
        self._rv_unavailable = False
        self.last_sync_rv = list_rv
        self.stats.lists += 1
        # Not "healthy" yet: only a working watch clears a failure streak (a LIST that succeeds
        # while every WATCH is refused must still show up as failing on /readyz).
        self._sink.replace_listed(items, list_rv)

    async def _list_pages(self, rv: str) -> tuple[list[Listed], str]:
        limit = list_page_size(rv, self._paginated_before, self._page_size)
        items: list[Listed] = []
        token: str | None = None
        list_rv = rv
        timeout = RequestTimeout(total=self._list_timeout, connect=10.0)
        while True:
            try:
                page = await self.client.list_page(
                    self.resource,
                    self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    resource_version=rv,
                    limit=limit or None,
                    continue_token=token,
                    request_timeout=timeout,
                )
            except Expired:
                if token is None:
                    raise
                # The continue token outlived etcd's compaction window: one unpaged list instead
                # (client-go pager's FullListIfExpired).
                self._log.info("continue token expired, listing without paging")
                items, token, limit = [], None, 0
                continue
            self.stats.list_pages += 1
            meta = page.get("metadata") or {}
            # Each object leaves the page as the sink keeps it; the page's dicts go with the page.
            items.extend(self._sink.listed(self._prepare(obj)) for obj in page.pop("items", None) or ())
            list_rv = str(meta.get("resourceVersion") or list_rv)
            token = meta.get("continue") or None
            if token is None:
                return items, list_rv
            self._paginated_before = True

    # -- WATCH ----------------------------------------------------------------------------------

    async def watch_once(self) -> None:
        """One WATCH request, read to its end; returns normally when it closes after doing work."""
        assert self.last_sync_rv is not None, "list before watching"
        started_from = self.last_sync_rv
        timeout_seconds = int(self._min_watch_timeout * (1.0 + self._rng.random()))
        started = self._clock.monotonic()
        delivered = 0
        seen_non_added = False
        self.stats.watches += 1
        try:
            async with self.client.watch(
                self.resource,
                self.namespace,
                resource_version=started_from,
                timeout_seconds=timeout_seconds,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                read_timeout=self._read_timeout,
            ) as response:
                self.stats.watching = True
                splitter = LineSplitter()
                async with Watchdog(self._clock, self._inactivity_timeout) as watchdog:
                    async for chunk in response.iter_chunks():
                        for line in splitter.feed(chunk):
                            watchdog.touch()
                            delivered += 1
                            if delivered == 1:
                                self._healthy()
                            seen_non_added = self._handle_line(line, started_from, seen_non_added)
        except (TransportError, WatchInactive, LineTooLong, orjson.JSONDecodeError) as exc:
            if delivered == 0 and self._clock.monotonic() - started < 1.0:
                raise
            # A stream cut after it did work is an ordinary end: resume from the last RV.
            self._log.info("watch stream ended", reason=repr(exc), events=delivered)
            return
        finally:
            self.stats.watching = False
        if delivered == 0 and self._clock.monotonic() - started < 1.0:
            raise VeryShortWatch(f"watch of {self.resource} closed within a second without events")
        self._healthy()

    def _handle_line(self, line: bytes, started_from: str, seen_non_added: bool) -> bool:
        event: dict[str, Any] = orjson.loads(line)
        event_type = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return seen_non_added
        if event_type == "ERROR":
            raise error_from_status(int(obj.get("code") or 500), obj)
        event_rv = (obj.get("metadata") or {}).get("resourceVersion")
        assert self.last_sync_rv is not None
        self.last_sync_rv, seen = advance_rv(
            self.last_sync_rv,
            str(event_type),
            str(event_rv) if event_rv is not None else None,
            started_from=started_from,
            seen_non_added=seen_non_added,
        )
        if event_type == "BOOKMARK":
            self.stats.bookmarks += 1
            return seen
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            self._log.warning("unexpected watch event type", event_type=event_type)
            return seen
        if obj.get("kind") not in (None, self.resource.kind):
            self._log.warning("unexpected kind in watch", kind=obj.get("kind"))
            return seen
        self._sink.watch_event(event_type, self._prepare(obj))
        return seen

    # -- helpers --------------------------------------------------------------------------------

    def _prepare(self, obj: Obj) -> Obj:
        # LIST items carry no apiVersion/kind; make every cached object self-describing.
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        return self._transform(obj) if self._transform is not None else obj

    def _healthy(self) -> None:
        self.failing_since = None
        self.last_error = None

    def _failed(self, exc: BaseException) -> None:
        self.stats.failures += 1
        # A resource that is not served is asked for every second or two: said once, not each time.
        still_absent = isinstance(exc, NotFound) and isinstance(self.last_error, NotFound)
        self.last_error = exc
        if self.failing_since is None:
            self.failing_since = self._clock.monotonic()
        if still_absent:
            level = "debug"
        elif isinstance(exc, ApiError | TransportError | VeryShortWatch):
            level = "warning"
        else:
            level = "error"
        getattr(self._log, level)("list/watch failed", error=repr(exc), exc_info=level == "error")

    def failing_for(self) -> float:
        """Seconds this reflector has been failing without a success in between (0 when healthy)."""
        return 0.0 if self.failing_since is None else self._clock.monotonic() - self.failing_since
