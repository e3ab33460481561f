"""`llmkube list`, `status` and `queue`: read-only views of services, models and the GPU queue."""

import argparse
from datetime import UTC, datetime
from typing import Any

from rich.console import Group
from rich.padding import Padding
from rich.text import Text

from llmkube.kube.errors import ApiError, NotFound
from llmkube.kube.types import Obj
from llmkube.usercli import render, views
from llmkube.usercli.errors import explain
from llmkube.usercli.kinds import CORE_EVENTS, INFERENCE_SERVICES, MODEL_KINDS, MODELS
from llmkube.usercli.session import Session


async def get_service(session: Session, name: str) -> Obj:
    try:
        return await session.client.get(INFERENCE_SERVICES, name, session.namespace)
    except ApiError as error:
        raise explain(error, f'InferenceService "{name}" in namespace "{session.namespace}"') from error


async def get_model_or_none(session: Session, name: str) -> Obj | None:
    try:
        return await session.client.get(MODELS, name, session.namespace)
    except NotFound:
        return None
    except ApiError as error:
        raise explain(error, f'Model "{name}"') from error


async def events_about(session: Session, name: str, kinds: tuple[str, ...]) -> list[Obj]:
    try:
        listed = await session.client.list_page(
            CORE_EVENTS, session.namespace, field_selector=f"involvedObject.name={name}"
        )
    except ApiError:
        return []  # events are a courtesy: a user who may not read them still gets the status
    items: list[Obj] = listed.get("items") or []
    return [e for e in items if (e.get("involvedObject") or {}).get("kind") in kinds]


async def run_list(session: Session, args: argparse.Namespace) -> int:
    namespace = None if args.all_namespaces else session.namespace
    now = datetime.now(UTC)
    console = render.make_console()
    if args.kind in MODEL_KINDS:
        models = views.sort_by_name(await _list(session, MODELS, namespace))
        if args.output in ("json", "yaml"):
            render.dump(render.object_list(models), args.output)
            return 0
        rows = [views.model_row(m, now) for m in models]
        if not rows:
            console.print(_nothing("Models", namespace))
            return 0
        render.emit(render.models_table(rows, all_namespaces=namespace is None))
        return 0
    services = views.sort_by_name(await _list(session, INFERENCE_SERVICES, namespace))
    if args.output in ("json", "yaml"):
        render.dump(render.object_list(services), args.output)
        return 0
    service_rows = [views.service_row(s, now) for s in services]
    if not service_rows:
        console.print(_nothing("InferenceServices", namespace))
        return 0
    table = render.services_table(service_rows, all_namespaces=namespace is None, wide=args.output == "wide")
    render.emit(table)
    return 0


def _nothing(what: str, namespace: str | None) -> str:
    return f"No {what} found" + (f' in namespace "{namespace}".' if namespace else ".")


async def _list(session: Session, resource: Any, namespace: str | None) -> list[Obj]:
    try:
        return await session.client.list_all(resource, namespace)
    except ApiError as error:
        raise explain(error, f"listing {resource.plural}") from error


async def run_queue(session: Session, args: argparse.Namespace) -> int:
    """The GPU queue is cluster-wide (one pool of GPUs), so it is listed across namespaces."""
    services = await _list(session, INFERENCE_SERVICES, None)
    now = datetime.now(UTC)
    rows = views.queue_rows(services, now)
    if args.output in ("json", "yaml"):
        render.dump([row.__dict__ for row in rows], args.output)
        return 0
    console = render.make_console()
    if not rows:
        console.print("No InferenceService is waiting for GPUs.")
        return 0
    render.emit(render.queue_table(rows))
    return 0


async def run_status(session: Session, args: argparse.Namespace) -> int:
    isvc = await get_service(session, args.name)
    model_name = str((isvc.get("spec") or {}).get("modelRef") or "")
    model = await get_model_or_none(session, model_name) if model_name else None
    events = await events_about(session, args.name, ("InferenceService",))
    if model_name:
        events += await events_about(session, model_name, ("Model",))
    if args.output in ("json", "yaml"):
        render.dump({"inferenceService": isvc, "model": model, "events": events}, args.output)
        return 0
    now = datetime.now(UTC)
    namespace = session.namespace
    parts: list[Any] = [
        Text(f"InferenceService {namespace}/{args.name}", style="bold"),
        Padding(render.facts_table(views.service_summary(isvc, model)), (0, 0, 1, 2)),
    ]
    if model is not None:
        parts += [
            Text(f"Model {namespace}/{model_name}", style="bold"),
            Padding(render.facts_table(views.model_summary(model)), (0, 0, 1, 2)),
        ]
    else:
        parts.append(Text(f'Model "{model_name}" does not exist in namespace "{namespace}".\n', style="red"))
    conditions = views.condition_rows("InferenceService", isvc, now)
    conditions += views.condition_rows("Model", model, now)
    if conditions:
        parts += [
            Text("Conditions", style="bold"),
            Padding(render.conditions_table(conditions), (0, 0, 1, 2)),
        ]
    event_rows = views.event_rows(events, now)
    parts.append(Text("Recent events", style="bold"))
    parts.append(Padding(render.events_table(event_rows) if event_rows else Text("none"), (0, 0, 0, 2)))
    render.emit(Group(*parts))
    return 0
