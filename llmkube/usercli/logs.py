"""`llmkube logs NAME`: the serving container's output of every replica (or the model download's)."""

import argparse
import asyncio
import sys

from llmkube.kube.errors import ApiError
from llmkube.kube.rest import RequestTimeout, TransportError
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.storage import INIT_CONTAINER_NAME
from llmkube.usercli.errors import UserError, explain
from llmkube.usercli.inspect import get_service
from llmkube.usercli.kinds import PODS
from llmkube.usercli.pods import not_started, service_pods, serving_container
from llmkube.usercli.session import Session

_STREAM = RequestTimeout(total=None, connect=10.0, read=None)


def log_params(container: str, args: argparse.Namespace) -> dict[str, str | int | bool | None]:
    return {
        "container": container,
        "follow": bool(args.follow) or None,
        "tailLines": args.tail if args.tail is not None and args.tail >= 0 else None,
        "timestamps": bool(args.timestamps) or None,
        "previous": bool(args.previous) or None,
    }


async def _stream(session: Session, pod: Obj, container: str, args: argparse.Namespace, prefix: str) -> None:
    name = pod["metadata"]["name"]
    path = PODS.object_path(name, session.namespace, "log")
    pending = b""
    try:
        async with session.client.open(
            "GET", path, params=log_params(container, args), request_timeout=_STREAM
        ) as response:
            async for chunk in response.iter_chunks():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    sys.stdout.write(prefix + line.decode(errors="replace") + "\n")
                sys.stdout.flush()
    except ApiError as error:
        raise explain(error, f'logs of pod "{name}" (container {container})') from error
    except TransportError as error:
        raise UserError(f'the log stream of pod "{name}" was cut: {error}') from error
    if pending:
        sys.stdout.write(prefix + pending.decode(errors="replace") + "\n")


async def run_logs(session: Session, args: argparse.Namespace) -> int:
    isvc = await get_service(session, args.name)
    container = INIT_CONTAINER_NAME if args.download else serving_container(isvc)
    pods = await service_pods(session, args.name)
    if args.pod:
        pods = [p for p in pods if p["metadata"]["name"] == args.pod]
    if not pods:
        raise UserError(f'"{args.name}" has no pods (yet): see llmkube status {args.name}')
    waiting = {p["metadata"]["name"]: not_started(p, container, previous=args.previous) for p in pods}
    started = [p for p in pods if not waiting[p["metadata"]["name"]]]
    if not started:  # an empty 200 is what the API server answers for a pod not on a node yet
        first = next(iter(waiting.values()))
        raise UserError(f"{first}: see llmkube status {args.name}")
    for reason in waiting.values():
        if reason:
            print(f"{reason} (skipped)", file=sys.stderr)
    pods = started
    prefixed = len(pods) > 1
    await asyncio.gather(
        *(
            _stream(session, pod, container, args, f"[{pod['metadata']['name']}] " if prefixed else "")
            for pod in pods
        )
    )
    return 0
