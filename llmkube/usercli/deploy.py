"""`llmkube deploy SOURCE`: create (or update) a Model and an InferenceService, then wait for Ready.

Objects are written with server-side apply under the field manager `llmkube-cli`, without force:
deploying the same thing twice changes nothing, and a field someone else owns (a GitOps tool, a
colleague's `kubectl apply`) is reported as a conflict instead of being taken over.
"""

import argparse
import asyncio
import sys
from typing import Any

import orjson

from llmkube.kube.errors import ApiError, Conflict
from llmkube.kube.resource import Resource
from llmkube.kube.rest import APPLY_PATCH
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.memory_fit import ENFORCE_ANNOTATION, ENFORCE_VALUE
from llmkube.plan.model.source import SourceKind, classify_source
from llmkube.usercli import render
from llmkube.usercli.catalog.entries import CatalogEntry, deploy_options, find_entry
from llmkube.usercli.errors import UserError, explain
from llmkube.usercli.fit import check_memory_fit, report
from llmkube.usercli.hub import resolve_model_file
from llmkube.usercli.kinds import FIELD_MANAGER, INFERENCE_SERVICES, MODELS
from llmkube.usercli.manifests import DeployError, DeployOptions, build_manifests
from llmkube.usercli.progress import wait_until_ready
from llmkube.usercli.session import Session


def options_from_args(args: argparse.Namespace, namespace: str) -> DeployOptions:
    """The command line's options; for a catalog id (`deploy qwen2.5-7b-instruct`), the entry's
    source, files, quantisation and context under them."""
    options = DeployOptions(
        source=args.source,
        name=args.name,
        namespace=namespace,
        runtime=args.runtime,
        image=args.image,
        gpus=args.gpu,
        gpu_vendor=args.gpu_vendor,
        gpu_layers=args.gpu_layers,
        gpu_memory=args.gpu_memory,
        cpu=args.cpu,
        memory=args.memory,
        replicas=args.replicas,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        context_size=args.context_size,
        parallel_slots=args.parallel,
        cache_type_k=args.cache_type_k,
        cache_type_v=args.cache_type_v,
        flash_attention=args.flash_attn,
        priority=args.priority,
        quantization=args.quantization,
        sha256=args.sha256,
        files=tuple(getattr(args, "file", None) or ()),
        port=args.port,
        extra_args=tuple(args.extra_arg or ()),
        env=tuple(args.env or ()),
        annotations=dict(args.annotations)
        | ({ENFORCE_ANNOTATION: ENFORCE_VALUE} if args.enforce_memory_fit else {}),
    )
    entry = catalog_entry(args.source)
    return deploy_options(entry, options) if entry is not None else options


def catalog_entry(source: str) -> CatalogEntry | None:
    """The catalog entry a source names: only a word that is no source of any kind (a URL, a path,
    `org/repo`) is looked up, so a source is never shadowed by an id."""
    if classify_source(source) is not SourceKind.UNKNOWN:
        return None
    return find_entry(source)


def manifests_from_args(args: argparse.Namespace, namespace: str) -> tuple[Obj, Obj]:
    try:
        return build_manifests(options_from_args(args, namespace))
    except DeployError as error:
        raise UserError(str(error)) from error


async def apply(session: Session, resource: Resource, obj: Obj, *, dry_run: bool = False) -> Obj:
    meta = obj["metadata"]
    params: dict[str, str | int | bool | None] = {"fieldManager": FIELD_MANAGER}
    if dry_run:
        params["dryRun"] = "All"
    path = resource.object_path(meta["name"], meta["namespace"])
    what = f'{resource.kind} "{meta["name"]}"'
    try:
        result: Obj = await session.client.request(
            "PATCH", path, params=params, body=orjson.dumps(obj), content_type=APPLY_PATCH
        )
    except Conflict as conflict:
        fields = ", ".join(cause.field for cause in conflict.causes) or "some fields"
        raise UserError(
            f"{what} already exists and another manager owns {fields}; "
            "change it with the tool that manages it, or delete it first"
        ) from conflict
    except ApiError as error:
        raise explain(error, f"creating {what}") from error
    return result


def print_offline(args: argparse.Namespace) -> int:
    """`--dry-run` (client): the objects, without a cluster (a Hugging Face repository's file list
    is still read from the Hub: it decides the file)."""
    args = asyncio.run(resolve_model_file(args))
    model, isvc = manifests_from_args(args, args.namespace or "default")
    render.dump([model, isvc], args.output if args.output in ("json", "yaml") else "yaml")
    return 0


async def run_deploy(session: Session, args: argparse.Namespace) -> int:
    args = await resolve_model_file(args)
    model, isvc = manifests_from_args(args, session.namespace)
    structured = args.output in ("json", "yaml")
    if args.dry_run == "client":
        render.dump([model, isvc], args.output if structured else "yaml")
        return 0
    console = render.make_console(sys.stderr if structured or args.dry_run else sys.stdout)
    name = isvc["metadata"]["name"]
    if args.dry_run == "server":
        await apply(session, MODELS, model, dry_run=True)
        await apply(session, INFERENCE_SERVICES, isvc, dry_run=True)
        console.print(f'[green]The API server accepts Model and InferenceService "{name}".[/green]')
        report(console, await check_memory_fit(session, name, isvc, within=0), isvc)
        render.dump([model, isvc], args.output if structured else "yaml")
        return 0
    # The API server's word first (schema, admission policies, quotas): a refusal of either object
    # leaves nothing behind, where applying the Model first would leave it when the service is refused.
    await apply(session, MODELS, model, dry_run=True)
    await apply(session, INFERENCE_SERVICES, isvc, dry_run=True)
    await apply(session, MODELS, model)
    console.print(f'Model "{name}" applied (source {model["spec"]["source"]})')
    if args.fit_wait > 0:
        with console.status("checking whether it fits (waiting for the Model's metadata)"):
            check = await check_memory_fit(session, name, isvc, within=args.fit_wait)
        if report(console, check, isvc):
            console.print(
                f'The Model "{name}" stays; delete it with: llmkube delete {name} -n {session.namespace}'
            )
            return 1
    await apply(session, INFERENCE_SERVICES, isvc)
    console.print(f'InferenceService "{name}" applied in namespace "{session.namespace}"')
    if args.no_wait:
        return _finish(args, [model, isvc])
    progress, live = await wait_until_ready(session, name, name, console, within=args.timeout)
    if progress.outcome == "failed":
        console.print(f"[bold red]{progress.detail}[/bold red]")
        console.print(f"See: llmkube status {name} -n {session.namespace}")
        return 1
    if progress.outcome != "ready":
        console.print(
            f"[yellow]Not Ready after {args.timeout:.0f}s[/yellow]; it keeps going in the cluster. "
            f"See: llmkube status {name} -n {session.namespace}"
        )
        return 1
    endpoint = ((live or {}).get("status") or {}).get("endpoint") or ""
    console.print(f'[green]"{name}" is Ready[/green]: {endpoint}')
    console.print(f'Try it: llmkube chat {name} -n {session.namespace} "Hello!"')
    return _finish(args, [model, live or isvc])


def _finish(args: argparse.Namespace, objects: list[Any]) -> int:
    if args.output in ("json", "yaml"):
        render.dump(objects, args.output)
    return 0
