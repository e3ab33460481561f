"""The Model controller's actions (HEAD and Range reads, local copies, hashing) as tasks of their
own, so that none holds a reconcile worker while it runs.

Before, a reconcile performed its action and waited: a source that hangs held a worker for the
whole timeout, and 8 hanging sources in one namespace (4 Model workers) delayed an ordinary Model
elsewhere from 0.21 s to 20 s. Now a reconcile that needs an action starts it here and ends; the
action runs in a pool shared fairly between namespaces (kube/control/fairslots.py: a few slots per
namespace, free slots handed round-robin), and when it ends its result is kept and the Model is
queued again. The next reconcile finds the result among its facts (`facts_for`) and plans from
it, as it would have planned from an action it had performed itself; while the action runs,
that it runs is a fact too (`ModelFacts.pending`), and the planner waits for it.

A result is kept until a reconcile that saw it ends without an error (`consumed`): a reconcile
whose status write fails is retried with the same result, never with a fetch of its own.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import structlog

from llmkube.controllers.modelsource.executor import ActionPerformer
from llmkube.kube.blocking import StopRequested
from llmkube.kube.control import FairSlots
from llmkube.kube.types import ObjectKey
from llmkube.plan.model import (
    ActionKind,
    FetchError,
    FetchFailure,
    HeaderFailure,
    HubListing,
    ListingFailure,
    ModelAction,
    ModelFacts,
    ProbeFailure,
    ProbeOutcome,
    RemoteHeader,
)
from llmkube.plan.model.source import SourceKind

log = structlog.get_logger("llmkube.controllers.modelsource")

__all__ = ["BackgroundActions", "Perform", "SlotPools"]

#: Performs one action for one Model: the facts it adds (ModelSourceIO.perform, timed).
Perform = Callable[[ObjectKey, ModelAction, ModelFacts], Awaitable[ModelFacts | None]]

#: Remote reads at once, in all and per namespace: each holds a socket and a few KiB, and gives up
#: after its timeouts (10 s for a HEAD, 30 s for a header).
NETWORK_SLOTS, NETWORK_SLOTS_PER_NAMESPACE = 16, 2
#: Copies and hashes per namespace (the total is the Model worker count: they share one disk).
DISK_SLOTS_PER_NAMESPACE = 2


@dataclass(frozen=True)
class SlotPools:
    network: FairSlots
    disk: FairSlots

    @classmethod
    def sized(cls, disk_total: int) -> SlotPools:
        return cls(
            network=FairSlots(NETWORK_SLOTS, NETWORK_SLOTS_PER_NAMESPACE),
            disk=FairSlots(max(1, disk_total), min(max(1, disk_total), DISK_SLOTS_PER_NAMESPACE)),
        )

    def for_action(self, action: ModelAction) -> FairSlots:
        network = action.source_kind is SourceKind.HTTP or action.kind is ActionKind.LIST_REPOSITORY
        return self.network if network else self.disk


@dataclass
class _Running:
    action: ModelAction
    task: asyncio.Task[None]


@dataclass(frozen=True)
class _Results:
    token: int
    facts: ModelFacts  # only the results, and `results_for`


def _failed(action: ModelAction, error: BaseException) -> ModelFacts:
    """The facts of an action whose helper raised (a bug: they report failures as values): a
    failed result, so the Model fails in status instead of waiting for ever."""
    detail = f"{action.kind.value} of {action.source} failed: {error!r}"
    if action.kind in (ActionKind.PROBE_FINGERPRINT, ActionKind.READ_HEADER):
        header = RemoteHeader(failure=HeaderFailure.IO_ERROR, detail=detail)
        probe = ProbeOutcome(failure=ProbeFailure.IO_ERROR, detail=detail)
        if action.kind is ActionKind.READ_HEADER:
            return ModelFacts(remote_header=header)
        return ModelFacts(probe=probe, remote_header=header if action.read_header else None)
    if action.kind is ActionKind.LIST_REPOSITORY:
        return ModelFacts(hub_listing=HubListing(failure=ListingFailure.CONNECTION, detail=detail))
    failure = FetchError(FetchFailure.IO_ERROR, detail)
    if action.kind is ActionKind.VERIFY:
        return ModelFacts(verify=failure)
    return ModelFacts(copy=failure)


class BackgroundActions:
    """Runs each Model's actions in the background; `requeue(key)` is called when one ends."""

    def __init__(self, perform: Perform, requeue: Callable[[ObjectKey], None], pools: SlotPools) -> None:
        self._perform = perform
        self._requeue = requeue
        self._pools = pools
        self._running: dict[ObjectKey, _Running] = {}
        self._results: dict[ObjectKey, _Results] = {}
        self._tokens = itertools.count(1)
        self._closed = False

    def __len__(self) -> int:
        """Models with an action in flight or a result not yet consumed."""
        return len(self._running.keys() | self._results.keys())

    def running(self, key: ObjectKey) -> ModelAction | None:
        entry = self._running.get(key)
        return entry.action if entry is not None else None

    def facts_for(self, key: ObjectKey, facts: ModelFacts) -> tuple[ModelFacts, int | None]:
        """`facts` with the action in flight and the results not yet consumed; the token names
        those results for `consumed`."""
        facts = replace(facts, pending=self.running(key))
        results = self._results.get(key)
        if results is None:
            return facts, None
        found = results.facts
        merged = replace(
            facts,
            probe=found.probe,
            remote_header=found.remote_header,
            copy=found.copy,
            verify=found.verify,
            hub_listing=found.hub_listing,
            results_for=found.results_for,
        )
        return merged, results.token

    def consumed(self, key: ObjectKey, token: int | None) -> None:
        """A reconcile that saw the results named by `token` ended well: they are spent."""
        results = self._results.get(key)
        if token is not None and results is not None and results.token == token:
            del self._results[key]

    def performer(self, key: ObjectKey) -> ActionPerformer:
        return _Starter(self, key)

    def start(self, key: ObjectKey, action: ModelAction) -> None:
        """Run `action` for the Model `key`: an action already running for it is kept when it is
        the same, else cancelled (the spec moved on: its result would be ignored anyway). Nothing
        starts once the controllers stop (`close`): a reconcile still finishing must not leave a
        task behind."""
        if self._closed:
            return
        running = self._running.get(key)
        if running is not None:
            if running.action == action:
                return
            running.task.cancel()
        task = asyncio.get_running_loop().create_task(
            self._run(key, action), name=f"model-action:{key.namespace}/{key.name}:{action.kind.value}"
        )
        self._running[key] = _Running(action, task)

    async def _run(self, key: ObjectKey, action: ModelAction) -> None:
        try:
            async with self._pools.for_action(action).slot(key.namespace):
                facts = await self._perform(key, action, ModelFacts())
        except asyncio.CancelledError:
            self._done(key)
            raise
        except StopRequested:  # the controllers are stopping: the next leader starts afresh
            self._done(key)
            return
        except Exception as error:  # reported in the Model's status, never lost
            log.exception(
                "model action failed", namespace=key.namespace, name=key.name, action=action.kind.value
            )
            facts = _failed(action, error)
        self._done(key)
        if facts is None:
            return
        self._keep(key, action, facts)
        self._requeue(key)

    def _keep(self, key: ObjectKey, action: ModelAction, facts: ModelFacts) -> None:
        """Keep the action's results, with those of earlier actions for the same spec that no
        reconcile has consumed yet (a newer result of the same kind wins)."""
        earlier = self._results.get(key)
        base = (
            earlier.facts
            if earlier is not None and earlier.facts.results_for == action.target
            else ModelFacts()
        )
        kept = ModelFacts(
            probe=facts.probe or base.probe,
            remote_header=facts.remote_header or base.remote_header,
            copy=facts.copy or base.copy,
            verify=facts.verify or base.verify,
            hub_listing=facts.hub_listing or base.hub_listing,
            results_for=action.target,
        )
        self._results[key] = _Results(next(self._tokens), kept)

    def _done(self, key: ObjectKey) -> None:
        current = asyncio.current_task()
        running = self._running.get(key)
        if running is not None and running.task is current:
            del self._running[key]

    def forget(self, key: ObjectKey) -> None:
        """The Model is gone: stop its action, drop its results."""
        running = self._running.pop(key, None)
        if running is not None:
            running.task.cancel()
        self._results.pop(key, None)

    async def close(self) -> None:
        """Cancel every action in flight and wait for them (the controllers are stopping, for good:
        a process leads once)."""
        self._closed = True
        tasks = [running.task for running in self._running.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._running.clear()
        self._results.clear()


@dataclass(frozen=True)
class _Starter:
    """drive_model_plan's performer for one Model: starts the action, never waits for it."""

    actions: BackgroundActions
    key: ObjectKey

    async def perform(self, action: ModelAction, facts: ModelFacts) -> ModelFacts | None:
        self.actions.start(self.key, action)
        return None
