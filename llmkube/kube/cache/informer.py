"""A shared informer: one reflector feeding one indexed store, fanning changes out to handlers.

Handlers run synchronously, in watch order, right after the store was updated, so a handler that
looks something up in the store sees the state that includes the change.  They must be quick and
must not block (a controller's handler only maps the change to keys and adds them to a queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from typing import Any

import structlog

from llmkube.kube.cache.reflector import Reflector
from llmkube.kube.cache.store import Change, IndexFunc, Listed, Store, object_key
from llmkube.kube.cache.transform import Transform, strip_for_cache
from llmkube.kube.clock import Clock, RealClock
from llmkube.kube.resource import Resource
from llmkube.kube.rest import ApiClient
from llmkube.kube.types import Obj

__all__ = ["ChangeHandler", "Informer"]

log = structlog.get_logger("llmkube.kube.cache.informer")

ChangeHandler = Callable[[Change], None]


class Informer:
    def __init__(
        self,
        client: ApiClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        field_manager: str = "llmkube-controller",
        indexers: dict[str, IndexFunc] | None = None,
        compact: bool = False,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        **reflector_options: Any,
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store = Store(indexers, compact=compact)
        #: the transform asked for (None: the default, which strips managedFields but ours)
        self.transform = transform
        self._clock = clock or RealClock()
        self._handlers: list[ChangeHandler] = []
        #: told the store key of every change, and nothing else (no object is parsed for them)
        self._key_listeners: list[Callable[[str], None]] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.reflector = Reflector(
            client,
            resource,
            self,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            transform=transform or strip_for_cache(field_manager),
            clock=self._clock,
            rng=rng,
            **reflector_options,
        )
        self._log = log.bind(resource=str(resource), namespace=namespace or "", selector=label_selector or "")

    # -- configuration --------------------------------------------------------------------------

    def add_handler(self, handler: ChangeHandler) -> None:
        """Register a handler; objects already cached are replayed to it as initial ADDED changes."""
        self._handlers.append(handler)
        if self.has_synced():
            for obj in self.store.objects():
                self._call(handler, Change("ADDED", None, obj, initial=True))

    def add_key_listener(self, listener: Callable[[str], None]) -> None:
        """Register a listener told the key (``namespace/name``) of each change from now on."""
        self._key_listeners.append(listener)

    def add_index(self, name: str, func: IndexFunc) -> None:
        self.store.add_index(name, func)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self.reflector.run(), name=f"informer:{self.resource}:{self.namespace or '*'}"
            )
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def has_synced(self) -> bool:
        """True once the first LIST has been stored."""
        return self._synced.is_set()

    async def wait_for_sync(self) -> None:
        """Wait for the first LIST (bound it with ``asyncio.timeout``)."""
        await self._synced.wait()

    def failing_for(self) -> float:
        return self.reflector.failing_for()

    # -- ReflectorSink --------------------------------------------------------------------------

    def listed(self, obj: Obj) -> Listed:
        return self.store.listed(obj)

    def replace_listed(self, listed: list[Listed], resource_version: str) -> None:
        initial = not self.has_synced()
        pending = self.store.replace_listed(listed, initial=initial)
        self._synced.set()
        for change_of in pending:
            self._tell_key(change_of.key)
        if not self._handlers:
            return
        # Parsed one at a time as handed out (a compact store's objects are JSON bytes until then).
        for change in pending:
            self._dispatch(change.change())

    def replace(self, objects: list[Obj], resource_version: str) -> None:
        """A complete LIST result given as parsed objects (as a test or a benchmark has them)."""
        self.replace_listed([self.listed(obj) for obj in objects], resource_version)

    def watch_event(self, event_type: str, obj: Obj) -> None:
        if event_type == "DELETED":
            # The event carries the object's final state: better than our cached copy.
            self.store.delete(object_key(obj))
            change = Change("DELETED", obj, None)
        else:
            previous = self.store.upsert(obj)
            change = Change("ADDED" if previous is None else "MODIFIED", previous, obj)
        self._tell_key(object_key(obj))
        self._dispatch(change)

    def _tell_key(self, key: str) -> None:
        for listener in self._key_listeners:
            try:
                listener(key)
            except Exception:
                self._log.exception("key listener failed", key=key)

    def _dispatch(self, change: Change) -> None:
        for handler in self._handlers:
            self._call(handler, change)

    def _call(self, handler: ChangeHandler, change: Change) -> None:
        try:
            handler(change)
        except Exception:
            # A broken handler must not kill the watch (and with it every other handler).
            self._log.exception("event handler failed", change=change.type, key=object_key(change.obj))
