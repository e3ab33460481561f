"""`llmkube cache list [-n NS|-A]`, `llmkube cache preload MODEL` and `llmkube cache clear MODEL`:
the namespaces' model caches as the controller records them, never by looking into a pod or a claim.

A Model's cache entry is its `status.cacheKey` (the directory `<cache>/<cacheKey>/` of the
namespace's model cache claim) with `status.stagedFiles` (or its one file) and `status.size`;
the services that use it are the InferenceServices whose `spec.modelRef` names it. `preload` sets
`spec.prefetch: true`, so the controller's prefetch Job fills the cache before any service needs it.
`clear` asks the controller to remove the files (the annotation plan/model/cache_clear.py reads, a
new request id each time; `spec.prefetch: false` too, or the prefetch would fetch them again), and
waits for its answer in `status.cacheClear`. It refuses while a service names the Model, unless
`--force`; the controller checks that again when it acts.
"""

import argparse
import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError

from llmkube.api.model import Model, ModelStatus
from llmkube.kube.errors import ApiError
from llmkube.kube.rest import MERGE_PATCH
from llmkube.kube.types import Obj
from llmkube.plan.model.cache_clear import CLEAR_ANNOTATION, FINAL, FORCE_ANNOTATION, ClearRequest, refusal
from llmkube.plan.model.facts import ClearFacts
from llmkube.usercli import render
from llmkube.usercli.errors import UserError, explain
from llmkube.usercli.kinds import FIELD_MANAGER, INFERENCE_SERVICES, MODELS
from llmkube.usercli.session import Session


@dataclass(frozen=True)
class CacheRow:
    namespace: str
    model: str
    cache_key: str
    files: str  # the staged files, or the number of them
    size: str
    used_by: str  # the services that name the Model, or "-"
    state: str  # the Model's phase (Ready: in the cache or resolved; Downloading: being prefetched)


def _names_model(service: Obj, namespace: str, model: str) -> bool:
    meta, spec = service.get("metadata") or {}, service.get("spec") or {}
    return meta.get("namespace") == namespace and spec.get("modelRef") == model


def _cleared_state(status: Obj) -> str | None:
    """Clearing or Cleared while the controller's last clear of this cache key says so (a
    prefetch since makes it Refilled: the Model's phase tells again)."""
    record = status.get("cacheClear") or {}
    if record.get("cacheKey") != status.get("cacheKey") or record.get("phase") not in ("Clearing", "Cleared"):
        return None
    return str(record["phase"])


def cache_rows(models: Iterable[Obj], services: Iterable[Obj]) -> list[CacheRow]:
    """One row per Model with a cache key, sorted by namespace and name (pure)."""
    services = list(services)
    rows = []
    for model in models:
        meta, status = model.get("metadata") or {}, model.get("status") or {}
        key = status.get("cacheKey")
        if not key:
            continue  # a source the runtime resolves itself: nothing of it is in the cache
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        staged = [str(f) for f in status.get("stagedFiles") or []]
        cleared = _cleared_state(status)
        users = sorted(
            str((s.get("metadata") or {}).get("name")) for s in services if _names_model(s, namespace, name)
        )
        rows.append(
            CacheRow(
                namespace=namespace,
                model=name,
                cache_key=str(key),
                files="-" if cleared == "Cleared" else ", ".join(staged) if staged else "1",
                size="-" if cleared == "Cleared" else str(status.get("size") or "-"),
                used_by=", ".join(users) or "-",
                state=cleared or str(status.get("phase") or "-"),
            )
        )
    return sorted(rows, key=lambda row: (row.namespace, row.model))


async def run_cache_list(session: Session, args: argparse.Namespace) -> int:
    namespace = None if args.all_namespaces else session.namespace
    try:
        # -l selects Models; every service is read, to say which of them use the selected ones.
        models = await session.client.list_all(MODELS, namespace, label_selector=args.selector)
        services = await session.client.list_all(INFERENCE_SERVICES, namespace)
    except ApiError as error:
        raise explain(error, "listing Models and InferenceServices") from error
    rows = cache_rows(models, services)
    if args.output in ("json", "yaml"):
        render.dump({"items": [row.__dict__ for row in rows]}, args.output)
        return 0
    if not rows:
        where = f' in namespace "{namespace}"' if namespace else ""
        render.make_console().print(f"No cached Models found{where}.")
        return 0
    render.emit(render.cache_table(rows, all_namespaces=namespace is None))
    return 0


async def run_cache_preload(session: Session, args: argparse.Namespace) -> int:
    try:
        await session.client.patch(
            MODELS,
            args.model,
            {"spec": {"prefetch": True}},
            session.namespace,
            patch_type=MERGE_PATCH,
            field_manager=FIELD_MANAGER,
        )
    except ApiError as error:
        raise explain(error, f'Model "{args.model}" in namespace "{session.namespace}"') from error
    print(f'"{args.model}" is prefetched into the namespace\'s model cache (spec.prefetch: true)')
    return 0


def services_naming(services: Iterable[Obj], namespace: str, model: str) -> tuple[str, ...]:
    return tuple(
        sorted(
            str((s.get("metadata") or {}).get("name")) for s in services if _names_model(s, namespace, model)
        )
    )


def request_id(now: datetime) -> str:
    """A new request each time (the controller answers each id once)."""
    return now.strftime("%Y%m%dT%H%M%S.%fZ")


async def run_cache_clear(session: Session, args: argparse.Namespace) -> int:
    namespace, name = session.namespace, args.model
    what = f'Model "{name}" in namespace "{namespace}"'
    try:
        raw = await session.client.get(MODELS, name, namespace)
        services = await session.client.list_all(INFERENCE_SERVICES, namespace)
    except ApiError as error:
        raise explain(error, what) from error
    try:
        model = Model.model_validate(raw)
    except ValidationError as error:
        raise UserError(f"{what} does not match the API types: {error.errors()[0]['msg']}") from error
    request = ClearRequest(request_id(datetime.now(UTC)), force=args.force)
    users = services_naming(services, namespace, name)
    refused = refusal(model, model.status or ModelStatus(), ClearFacts(services=users), request)
    if refused is not None:
        raise UserError(f"{what} is not cleared: {refused}")
    patch: Obj = {
        "metadata": {
            "annotations": {
                CLEAR_ANNOTATION: request.request,
                FORCE_ANNOTATION: "true" if args.force else None,
            }
        }
    }
    if model.spec.prefetch:
        patch["spec"] = {"prefetch": False}  # else the prefetch Job would download it again at once
    try:
        await session.client.patch(
            MODELS, name, patch, namespace, patch_type=MERGE_PATCH, field_manager=FIELD_MANAGER
        )
    except ApiError as error:
        raise explain(error, what) from error
    if model.spec.prefetch:
        print(f'"{name}": spec.prefetch set to false (llmkube cache preload {name} fetches it again)')
    if args.no_wait:
        print(f'"{name}": clearing its cache asked for (request {request.request}); see llmkube cache list')
        return 0
    record = await _answer(session, name, request.request, args.timeout)
    if record is None:
        raise UserError(
            f"no answer from the controller within {args.timeout:.0f}s (request {request.request}); "
            "see llmkube cache list"
        )
    if record.get("phase") in ("Refused", "Failed"):
        raise UserError(f"{what} is not cleared ({record.get('phase')}): {record.get('message') or ''}")
    print(f'"{name}" cleared: {record.get("message") or ""}')
    return 0


async def _answer(session: Session, name: str, request: str, within: float) -> Obj | None:
    """The controller's final word on this request, or None when it gave none in time."""
    deadline = time.monotonic() + within
    while True:
        try:
            raw = await session.client.get(MODELS, name, session.namespace)
        except ApiError as error:
            raise explain(error, f'Model "{name}" in namespace "{session.namespace}"') from error
        record = (raw.get("status") or {}).get("cacheClear") or {}
        if record.get("request") == request and record.get("phase") in FINAL:
            return dict(record)
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(1.0)
