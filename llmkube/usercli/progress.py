"""Waiting for a deployment to become Ready, with a progress line a person can follow.

The decision of what the pair of objects says (ready, failed, still going, and why) is a pure
function of the two objects; the loop polls them, shows the line (a spinner on a terminal, one
printed line per change in a pipe or a log) and stops on Ready, Failed or the deadline.
"""

import asyncio
import time
from dataclasses import dataclass
from typing import Literal

from rich.console import Console

from llmkube.kube.errors import ApiError, NotFound
from llmkube.kube.types import Obj
from llmkube.usercli import views
from llmkube.usercli.kinds import INFERENCE_SERVICES, MODELS
from llmkube.usercli.session import Session

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


async def _get(session: Session, resource: object, name: str) -> Obj | None:
    try:
        return await session.client.get(resource, name, session.namespace)  # type: ignore[arg-type]
    except NotFound:
        return None


async def wait_until_ready(
    session: Session,
    name: str,
    model_name: str,
    console: Console,
    *,
    within: float,
    interval: float = 1.0,
) -> tuple[Progress, Obj | None]:
    """Poll until Ready or Failed or `within` seconds; returns the last assessment and service."""
    deadline = time.monotonic() + within
    started = time.monotonic()
    last_line = ""
    isvc: Obj | None = None
    progress = Progress("waiting", "")
    with console.status("waiting for the service to become Ready", spinner="dots") as spinner:
        while True:
            try:
                model = await _get(session, MODELS, model_name)
                isvc = await _get(session, INFERENCE_SERVICES, name)
                progress = assess(model, isvc)
            except ApiError as error:
                progress = Progress("waiting", f"(the API server answered: {error.message or error})")
            elapsed = views.human_duration(time.monotonic() - started)
            spinner.update(f"{progress.line}  [dim]{elapsed}[/dim]")
            if progress.line != last_line:  # every change stays on screen (and in a log)
                console.print(f"{progress.line}  [dim]({elapsed})[/dim]")
                last_line = progress.line
            if progress.outcome != "waiting" or time.monotonic() >= deadline:
                return progress, isvc
            await asyncio.sleep(interval)
