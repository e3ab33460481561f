"""`llmkube list`, `status` and `queue`: read-only views of services, models and the GPU queue,
as tables, objects (-o json|yaml|name|jsonpath=...) or, with -w, followed as they change."""

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Group
from rich.padding import Padding
from rich.text import Text

from llmkube.kube.errors import ApiError, NotFound
from llmkube.kube.resource import Resource
from llmkube.kube.types import Obj
from llmkube.usercli import render, views
from llmkube.usercli.errors import explain
from llmkube.usercli.kinds import CORE_EVENTS, INFERENCE_SERVICES, MODEL_KINDS, MODELS
from llmkube.usercli.pods import service_pods
from llmkube.usercli.session import Session
from llmkube.usercli.watching import changes, list_with_version


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
    resource = MODELS if args.kind in MODEL_KINDS else INFERENCE_SERVICES
    items, version = await list_with_version(session, resource, namespace, label_selector=args.selector)
    objects = views.sort_by_name(items)
    output = args.output or ""
    structured = output in ("json", "yaml") or output.startswith("jsonpath=")
    if structured:
        render.dump(render.object_list(objects), output)
    elif output == "name":
        render.names(objects, resource)
    elif not objects and not args.watch:
        print(_nothing(resource.kind + "s", namespace, args.selector), file=sys.stderr)  # as kubectl
    else:
        render.emit(_table(resource, objects, namespace is None, args, headers=not args.no_headers))
    if not args.watch:
        return 0
    sys.stdout.flush()
    # As kubectl get -w: after the list, one line (or object) per change, until Ctrl-C.
    async for _, obj in changes(session, resource, namespace, version, label_selector=args.selector):
        if structured:
            render.dump(obj, output)
        elif output == "name":
            render.names([obj], resource)
        else:
            render.emit(_table(resource, [obj], namespace is None, args, headers=False))
        sys.stdout.flush()
    return 0


def _table(
    resource: Resource,
    objects: Sequence[views.Obj],
    all_namespaces: bool,
    args: argparse.Namespace,
    *,
    headers: bool,
) -> Any:
    now = datetime.now(UTC)
    if resource is MODELS:
        rows = [views.model_row(m, now) for m in objects]
        return render.models_table(rows, all_namespaces=all_namespaces, headers=headers)
    service_rows = [views.service_row(s, now) for s in objects]
    return render.services_table(
        service_rows, all_namespaces=all_namespaces, wide=args.output == "wide", headers=headers
    )


def _nothing(what: str, namespace: str | None, selector: str | None = None) -> str:
    matching = f" matching {selector}" if selector else ""
    return f"No {what} found{matching}" + (f' in namespace "{namespace}".' if namespace else ".")


async def run_queue(session: Session, args: argparse.Namespace) -> int:
    """The GPU queue is cluster-wide (one pool of GPUs), so it is listed across namespaces."""
    services, _ = await list_with_version(session, INFERENCE_SERVICES, None, label_selector=args.selector)
    now = datetime.now(UTC)
    rows = views.queue_rows(services, now)
    if args.output in ("json", "yaml"):
        render.dump([row.__dict__ for row in rows], args.output)
        return 0
    console = render.make_console()
    if not rows:
        console.print("No InferenceService is waiting for GPUs.")
        return 0
    render.emit(render.queue_table(rows, headers=not args.no_headers))
    return 0


#: events `status -o wide` shows (10 otherwise)
WIDE_EVENTS = 50


async def run_status(session: Session, args: argparse.Namespace) -> int:
    await _show_status(session, args)
    if not args.watch:
        return 0
    sys.stdout.flush()
    # Shown again whenever the service or its Model changes (a watch of each, by name).
    isvc = await get_service(session, args.name)
    model_name = str((isvc.get("spec") or {}).get("modelRef") or "")
    woken: asyncio.Queue[None] = asyncio.Queue()

    async def follow(resource: Resource, name: str) -> None:
        selector = f"metadata.name={name}"
        _, version = await list_with_version(session, resource, session.namespace, field_selector=selector)
        async for _ in changes(session, resource, session.namespace, version, field_selector=selector):
            woken.put_nowait(None)

    followers = [asyncio.create_task(follow(INFERENCE_SERVICES, args.name))]
    if model_name:
        followers.append(asyncio.create_task(follow(MODELS, model_name)))
    try:
        while True:
            waiter = asyncio.create_task(woken.get())
            done, _ = await asyncio.wait([waiter, *followers], return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                waiter.cancel()
                for task in done:
                    task.result()  # a watch that failed ends the command with its error
                return 1
            while not woken.empty():  # a burst of changes is shown once
                woken.get_nowait()
            if not args.output:
                print(f"\n--- {datetime.now(UTC).strftime('%H:%M:%S')} UTC ---")
            await _show_status(session, args)
            sys.stdout.flush()
    finally:
        for task in followers:
            task.cancel()


async def _show_status(session: Session, args: argparse.Namespace) -> None:
    isvc = await get_service(session, args.name)
    output = args.output or ""
    if output == "name":
        render.names([isvc], INFERENCE_SERVICES)
        return
    if output.startswith("jsonpath="):
        render.dump(isvc, output)  # as kubectl get isvc NAME -o jsonpath=... does
        return
    model_name = str((isvc.get("spec") or {}).get("modelRef") or "")
    model = await get_model_or_none(session, model_name) if model_name else None
    events = await events_about(session, args.name, ("InferenceService",))
    if model_name:
        events += await events_about(session, model_name, ("Model",))
    if output in ("json", "yaml"):
        render.dump({"inferenceService": isvc, "model": model, "events": events}, output)
        return
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
    wide = output == "wide"
    if wide:
        # -o wide: the replicas as `kubectl get pods -o wide` shows them, and every recent event.
        pods = await service_pods(session, args.name)
        rows = [views.pod_row(pod, now) for pod in pods]
        parts += [
            Text("Replicas", style="bold"),
            Padding(render.plain_table(views.POD_HEADERS, rows) if rows else Text("none"), (0, 0, 1, 2)),
        ]
    event_rows = views.event_rows(events, now, limit=WIDE_EVENTS if wide else 10)
    parts.append(Text("Recent events", style="bold"))
    parts.append(Padding(render.events_table(event_rows) if event_rows else Text("none"), (0, 0, 0, 2)))
    render.emit(Group(*parts))
