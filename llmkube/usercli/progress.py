"""Waiting for a deployment to become Ready, with a progress line a person can follow.

The decision of what the pair of objects says (ready, failed, still going, and why) is a pure
function of the two objects; the loop follows them with a watch each (no polling: a line per
change, as the server sends it), shows the line (a spinner on a terminal, one printed line per
change in a pipe or a log) and stops on Ready, Failed or the deadline. When nothing has written a
status to either object for a while, it says the controller is not acting on them: that looked
like `Pending` for ever.
"""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from rich.console import Console

from llmkube.kube.resource import Resource
from llmkube.kube.types import Obj
from llmkube.usercli import views
from llmkube.usercli.kinds import INFERENCE_SERVICES, MODELS
from llmkube.usercli.session import Session
from llmkube.usercli.watching import changes, list_with_version

#: seconds without any status on the Model or the service before the controller is said not to act
CONTROLLER_SILENT_AFTER = 15.0

Outcome = Literal["ready", "failed", "waiting"]


@dataclass(frozen=True)
class Progress:
    outcome: Outcome
    line: str
    detail: str = ""


def _current(obj: Obj | None) -> bool:
    """The status was written for the present spec (a re-deploy may still show the old one)."""
    if obj is None:
        return False
    generation = (obj.get("metadata") or {}).get("generation")
    observed = [c.get("observedGeneration") for c in views.conditions(obj).values()]
    return generation is None or any(o is not None and o >= generation for o in observed)


def _failure(obj: Obj) -> str:
    degraded = views.conditions(obj).get("Degraded") or {}
    reason, message = degraded.get("reason") or "Failed", degraded.get("message") or ""
    return f"{reason}: {message}" if message else str(reason)


def assess(model: Obj | None, isvc: Obj | None) -> Progress:
    model_status = (model or {}).get("status") or {}
    service_status = (isvc or {}).get("status") or {}
    model_phase = str(model_status.get("phase") or "Pending")
    service_phase = str(service_status.get("phase") or "Pending") if _current(isvc) else "Pending"
    line = f"Model: {model_phase}, Service: {service_phase} ({views.replicas_column(isvc or {})} ready)"
    if isvc is not None and _current(isvc):
        waiting = views.waits_for(isvc, model)
        if waiting:
            line += f", waiting for {waiting}"
    if model_phase == "Failed" and model is not None:
        return Progress("failed", line, f"the Model failed: {_failure(model)}")
    if service_phase == "Failed" and isvc is not None:
        return Progress("failed", line, f"the InferenceService failed: {_failure(isvc)}")
    if model_phase == "Ready" and service_phase == "Ready":
        return Progress("ready", line)
    return Progress("waiting", line)


def controller_silent(model: Obj | None, isvc: Obj | None, waited: float, after: float) -> bool:
    """Nothing has written a status to either object in `after` seconds: no controller acts on
    them (a running controller writes the Model's status within a second of its creation)."""
    return waited >= after and not (model or {}).get("status") and not (isvc or {}).get("status")


def controller_silent_message(name: str, after: float) -> str:
    return (
        f'Nothing has written a status to Model or InferenceService "{name}" in {after:.0f}s: the llmkube '
        "controller is not acting on them. Is it running? kubectl get pods -A -l "
        "app.kubernetes.io/name=llmkube,app.kubernetes.io/component=controller (docs/troubleshooting.md)"
    )


async def _follow(
    session: Session, resource: Resource, name: str, into: "asyncio.Queue[tuple[Resource, Obj | None]]"
) -> None:
    """The object now, then each version the server sends (None once it is deleted)."""
    selector = f"metadata.name={name}"
    items, version = await list_with_version(session, resource, session.namespace, field_selector=selector)
    await into.put((resource, items[0] if items else None))
    async for kind, obj in changes(session, resource, session.namespace, version, field_selector=selector):
        await into.put((resource, None if kind == "DELETED" else obj))


@contextlib.asynccontextmanager
async def _followed(
    session: Session, names: dict[Resource, str]
) -> AsyncIterator["asyncio.Queue[tuple[Resource, Obj | None]]"]:
    queue: asyncio.Queue[tuple[Resource, Obj | None]] = asyncio.Queue()
    tasks = [asyncio.create_task(_follow(session, resource, name, queue)) for resource, name in names.items()]
    try:
        yield queue
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def wait_until_ready(
    session: Session,
    name: str,
    model_name: str,
    console: Console,
    *,
    within: float,
    silent_after: float = CONTROLLER_SILENT_AFTER,
) -> tuple[Progress, Obj | None]:
    """Follow both objects until Ready or Failed or `within` seconds; returns the last assessment
    and service."""
    started = time.monotonic()
    deadline = started + within
    last_line = ""
    objects: dict[Resource, Obj | None] = {MODELS: None, INFERENCE_SERVICES: None}
    progress = Progress("waiting", "")
    told_silent = False
    with console.status("waiting for the service to become Ready", spinner="dots") as spinner:
        async with _followed(session, {MODELS: model_name, INFERENCE_SERVICES: name}) as updates:
            while True:
                progress = assess(objects[MODELS], objects[INFERENCE_SERVICES])
                now = time.monotonic()
                elapsed = views.human_duration(now - started)
                spinner.update(f"{progress.line}  [dim]{elapsed}[/dim]")
                if progress.line != last_line:  # every change stays on screen (and in a log)
                    console.print(f"{progress.line}  [dim]({elapsed})[/dim]")
                    last_line = progress.line
                if not told_silent and controller_silent(
                    objects[MODELS], objects[INFERENCE_SERVICES], now - started, silent_after
                ):
                    console.print(f"[yellow]{controller_silent_message(name, silent_after)}[/yellow]")
                    told_silent = True
                if progress.outcome != "waiting" or now >= deadline:
                    return progress, objects[INFERENCE_SERVICES]
                # Woken by the next change, the silence check, the deadline, or the spinner's second.
                wake = deadline if told_silent else min(deadline, started + silent_after)
                wake = min(wake, now + 1.0)  # the elapsed time on the spinner (no request: a local wake)
                try:
                    async with asyncio.timeout(max(0.0, wake - now)):
                        update = await updates.get()
                except TimeoutError:
                    continue
                if isinstance(update, Exception):
                    raise update
                resource, obj = update
                objects[resource] = obj
