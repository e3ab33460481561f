"""`llmkube chat NAME MESSAGE` and `llmkube curl NAME [PATH]`: one request to a serving replica.

Outside the cluster the request goes through a port-forward to a Ready pod (over the API server,
like `kubectl port-forward`; see kube/rest/portforward.py for why not the Service proxy). Inside a pod
it goes straight to the Service's cluster DNS name.
"""

import argparse
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp

from llmkube.kube.rest import in_cluster, port_forward
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.names import service_name
from llmkube.plan.inferenceservice.service import DEFAULT_ENDPOINT_PATH, endpoint_port
from llmkube.sources import read_bounded
from llmkube.usercli import render
from llmkube.usercli.chat_stream import MAX_STREAM_BYTES, ChatStream
from llmkube.usercli.errors import UserError
from llmkube.usercli.inspect import get_service
from llmkube.usercli.pods import ready_pods, service_pods, serving_port, spec_of
from llmkube.usercli.session import Session


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float
    via: str


def chat_body(message: str, *, system: str | None, max_tokens: int, model: str | None) -> dict[str, Any]:
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": message}
    ]
    body: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens}
    if model:
        body["model"] = model
    return body


def chat_reply(answer: Obj) -> tuple[str, str]:
    """(the assistant's text, a one-line summary of tokens) from an OpenAI-style answer."""
    choices = answer.get("choices") or []
    message = (choices[0].get("message") or {}) if choices else {}
    text = str(message.get("content") or (choices[0].get("text") if choices else "") or "")
    usage = answer.get("usage") or {}
    summary = ""
    if usage:
        prompt, completion = usage.get("prompt_tokens", "?"), usage.get("completion_tokens", "?")
        summary = f"{prompt} prompt + {completion} completion tokens"
    return text, summary


@dataclass(frozen=True)
class Target:
    base_url: str
    via: str
    errors: list[str]  # what the port-forward's error channel said, to explain a failed request


@asynccontextmanager
async def service_target(
    session: Session, isvc: Obj, via: str, *, many_connections: bool = False
) -> AsyncIterator[Target]:
    """One serving replica: the Service's cluster DNS name from inside the cluster, else a
    port-forward to a Ready pod (with a stream opened ahead of each connection when there will be
    `many_connections`, one after another: kube/rest/portforward.py)."""
    name = isvc["metadata"]["name"]
    if via == "direct" or (via == "auto" and in_cluster()):
        spec = spec_of(isvc)
        port = endpoint_port(spec) if spec is not None else 8080
        yield Target(
            f"http://{service_name(name)}.{session.namespace}.svc.cluster.local:{port}", "service", []
        )
        return
    pods = await service_pods(session, name)
    ready = ready_pods(pods)
    if not ready:
        phase = (isvc.get("status") or {}).get("phase") or "Unknown"
        raise UserError(
            f'no replica of "{name}" is ready to answer (phase {phase}, {len(pods)} pod(s)); '
            f"see: llmkube status {name}"
        )
    pod = ready[0]
    port = serving_port(isvc, pod)
    pod_name = pod["metadata"]["name"]
    async with port_forward(
        session.config, session.namespace, pod_name, port, ahead=many_connections
    ) as forward:
        yield Target(
            f"http://127.0.0.1:{forward.local_port}", f"port-forward to {forward.pod}", forward.errors
        )


async def send(
    session: Session,
    isvc: Obj,
    method: str,
    path: str,
    *,
    via: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    within: float = 300.0,
) -> Answer:
    async with service_target(session, isvc, via) as target:
        url = target.base_url + (path if path.startswith("/") else f"/{path}")
        started = time.monotonic()
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=within)) as http,
                http.request(method, url, data=body, headers=headers or {}) as response,
            ):
                payload = await response.read()
                elapsed = time.monotonic() - started
                return Answer(response.status, dict(response.headers), payload, elapsed, target.via)
        except (aiohttp.ClientError, TimeoutError) as failed:
            cause = "; ".join(target.errors) or str(failed) or type(failed).__name__
            raise UserError(f"the request to {isvc['metadata']['name']} failed: {cause}") from failed


async def _model_id(session: Session, isvc: Obj, via: str) -> str | None:
    """vLLM and TGI want the served model's id in a chat request; they list it on /v1/models."""
    answer = await send(session, isvc, "GET", "/v1/models", via=via, within=30)
    try:
        data = json.loads(answer.body).get("data") or []
    except (ValueError, AttributeError):
        return None
    return str(data[0].get("id")) if data else None


async def run_chat(session: Session, args: argparse.Namespace) -> int:
    isvc = await get_service(session, args.name)
    spec = spec_of(isvc)
    path = (
        spec.endpoint.path if spec and spec.endpoint and spec.endpoint.path else None
    ) or DEFAULT_ENDPOINT_PATH
    model = args.model
    if model is None and spec is not None and spec.runtime in ("vllm", "tgi"):
        model = await _model_id(session, isvc, args.via)
    body = chat_body(args.message, system=args.system, max_tokens=args.max_tokens, model=model)
    if args.output not in ("json", "yaml") and not args.no_stream:
        return await _streamed_chat(session, isvc, path, body, args)
    answer = await send(
        session,
        isvc,
        "POST",
        path,
        via=args.via,
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        within=args.timeout,
    )
    if answer.status >= 400:
        raise UserError(f"{args.name} answered {answer.status}: {answer.body.decode(errors='replace')[:500]}")
    try:
        parsed = json.loads(answer.body)
    except ValueError as error:
        raise UserError(f"{args.name} did not answer JSON: {answer.body[:200]!r}") from error
    if args.output in ("json", "yaml"):
        render.dump(parsed, args.output)
        return 0
    text, summary = chat_reply(parsed)
    console = render.make_console()
    console.print(text.strip(), markup=False)
    details = ", ".join(part for part in (summary, f"{answer.seconds:.2f}s", f"via {answer.via}") if part)
    render.make_console(sys.stderr).print(f"[dim]({details})[/dim]")
    return 0


async def _streamed_chat(
    session: Session, isvc: Obj, path: str, body: dict[str, Any], args: argparse.Namespace
) -> int:
    """The answer printed as it comes, piece by piece (and the time to its first piece)."""
    name = isvc["metadata"]["name"]
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    stream = ChatStream()
    first: float | None = None
    async with service_target(session, isvc, args.via) as target:
        started = time.monotonic()
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=args.timeout)) as http,
                http.post(
                    target.base_url + path,
                    json=body,
                    headers={"Accept": "text/event-stream"},
                ) as response,
            ):
                if response.status >= 400:
                    said = await read_bounded(response.content, 64 * 1024)
                    raise UserError(
                        f"{name} answered {response.status}: {said.decode(errors='replace')[:500]}"
                    )
                if "text/event-stream" not in response.headers.get("Content-Type", ""):
                    # A server that does not stream answers whole: shown as such.
                    whole = await read_bounded(response.content, MAX_STREAM_BYTES)
                    text, _ = chat_reply(json.loads(whole))
                    sys.stdout.write(text.strip() + "\n")
                    return 0
                async for line in response.content:
                    piece = stream.feed(line)
                    if piece:
                        first = first if first is not None else time.monotonic() - started
                        sys.stdout.write(piece)
                        sys.stdout.flush()
                    if stream.done:
                        break
        except (aiohttp.ClientError, TimeoutError, ValueError) as failed:
            cause = "; ".join(target.errors) or str(failed) or type(failed).__name__
            raise UserError(f"the request to {name} failed: {cause}") from failed
        seconds = time.monotonic() - started
    sys.stdout.write("\n")
    sys.stdout.flush()
    if stream.error is not None:
        raise UserError(f"{name} stopped answering: {stream.error}")
    timing = f"{seconds:.2f}s" + (f", first token after {first * 1000:.0f} ms" if first is not None else "")
    details = ", ".join(part for part in (stream.summary(), timing, f"via {target.via}") if part)
    render.make_console(sys.stderr).print(f"[dim]({details})[/dim]")
    return 0


async def run_curl(session: Session, args: argparse.Namespace) -> int:
    isvc = await get_service(session, args.name)
    headers = {}
    for header in args.header or ():
        key, _, value = header.partition(":")
        if not key or not _:
            raise UserError(f'-H "{header}" must be "Name: value"')
        headers[key.strip()] = value.strip()
    data = args.data.encode() if args.data is not None else None
    if data is not None and not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    method = args.request or ("POST" if data is not None else "GET")
    answer = await send(
        session, isvc, method, args.path, via=args.via, body=data, headers=headers, within=args.timeout
    )
    if args.include:
        sys.stdout.write(f"HTTP {answer.status}\n")
        for key, value in answer.headers.items():
            sys.stdout.write(f"{key}: {value}\n")
        sys.stdout.write("\n")
    sys.stdout.write(answer.body.decode(errors="replace"))
    if answer.body and not answer.body.endswith(b"\n"):
        sys.stdout.write("\n")
    return 0 if answer.status < 400 else 1
