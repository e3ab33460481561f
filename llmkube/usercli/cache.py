"""`llmkube cache list [-n NS|-A]` and `llmkube cache preload MODEL`: the namespaces' model caches
as the controller records them, never by looking into a pod or a claim.

A Model's cache entry is its `status.cacheKey` (the directory `<cache>/<cacheKey>/` of the
namespace's model cache claim) with `status.stagedFiles` (or its one file) and `status.size`;
the services that use it are the InferenceServices whose `spec.modelRef` names it. `preload` sets
`spec.prefetch: true`, so the controller's prefetch Job fills the cache before any service needs it.
"""

import argparse
from collections.abc import Iterable
from dataclasses import dataclass

from llmkube.kube.errors import ApiError
from llmkube.kube.rest.client import MERGE_PATCH
from llmkube.kube.types import Obj
from llmkube.usercli import render
from llmkube.usercli.errors import explain
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
        users = sorted(
            str((s.get("metadata") or {}).get("name")) for s in services if _names_model(s, namespace, name)
        )
        rows.append(
            CacheRow(
                namespace=namespace,
                model=name,
                cache_key=str(key),
                files=", ".join(staged) if staged else "1",
                size=str(status.get("size") or "-"),
                used_by=", ".join(users) or "-",
                state=str(status.get("phase") or "-"),
            )
        )
    return sorted(rows, key=lambda row: (row.namespace, row.model))


async def run_cache_list(session: Session, args: argparse.Namespace) -> int:
    namespace = None if args.all_namespaces else session.namespace
    try:
        models = await session.client.list_all(MODELS, namespace)
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
