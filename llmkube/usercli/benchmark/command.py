"""`llmkube benchmark`: measure an InferenceService (through a port-forward, or its Service from
inside the cluster) or any OpenAI-compatible URL, at one or more concurrency levels; print a table,
JSON (`-o json`) or a PNG (`--plot`); `--compare OLD.json NEW.json` sets two runs side by side."""

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.service import DEFAULT_ENDPOINT_PATH
from llmkube.usercli import render
from llmkube.usercli.benchmark.loadgen import Level, LiveCounts, connector, run_level, tracing
from llmkube.usercli.benchmark.plot import write_plot
from llmkube.usercli.benchmark.prompts import (
    PATHS,
    PromptFileError,
    RequestShape,
    parse_prompt_file,
    request_body,
    synthetic_prompt,
)
from llmkube.usercli.benchmark.report import (
    COMPARE_HEADERS,
    LEVEL_HEADERS,
    BenchmarkRun,
    ReportError,
    RunSettings,
    compare_rows,
    from_document,
    level_rows,
    seconds_text,
    summary_lines,
    to_document,
)
from llmkube.usercli.benchmark.sizes import Sizes, fitted_sizes, words_that_fit
from llmkube.usercli.benchmark.stats import LevelResult, RequestRecord, first_messages, summarize
from llmkube.usercli.errors import UserError
from llmkube.usercli.inspect import get_service
from llmkube.usercli.pods import spec_of
from llmkube.usercli.request import service_target
from llmkube.usercli.session import Session

# A level whose client used more CPU than this share of its wall time was probably limited by the
# machine running the benchmark, not by the server: the command says so.
CLIENT_BUSY_SHARE = 0.8
PROGRESS_INTERVAL = 0.5  # seconds between updates of the progress line on a terminal
PIPE_PROGRESS_INTERVAL = 10.0  # in a pipe or a log, a line this often


def endpoint_url(url: str, endpoint: str) -> str:
    """A base URL (`http://host:8080`, `.../v1`) gets the endpoint's path; a URL that already ends
    with a completions path is used as it is."""
    url = url.rstrip("/")
    if url.endswith(("/chat/completions", "/completions")):
        return url
    path = PATHS["chat" if endpoint == "chat" else "completions"]
    return url + path.removeprefix("/v1") if url.endswith("/v1") else url + path


def _shape(args: argparse.Namespace, model: str | None) -> RequestShape:
    return RequestShape(
        endpoint=args.endpoint,
        max_tokens=args.max_tokens,
        stream=not args.no_stream,
        model=model,
        ignore_eos=not args.no_ignore_eos,
        temperature=args.temperature,
    )


def _bodies(args: argparse.Namespace, shape: RequestShape) -> tuple[Callable[[int], bytes], str]:
    if args.prompt_file:
        try:
            prompts = parse_prompt_file(Path(args.prompt_file).read_text())
        except OSError as error:
            raise UserError(f"cannot read {args.prompt_file}: {error.strerror}") from None
        except PromptFileError as error:
            raise UserError(f"{args.prompt_file}: {error}") from None
        return (
            lambda i: request_body(prompts[i % len(prompts)], shape),
            f"{Path(args.prompt_file).name} ({len(prompts)} prompts)",
        )
    return (
        lambda i: request_body(synthetic_prompt(args.prompt_tokens, i, args.seed), shape),
        f"synthetic prompts of ~{args.prompt_tokens} tokens",
    )


class ProgressLine:
    """One line on stderr while a level runs: rewritten in place on a terminal, printed every
    PIPE_PROGRESS_INTERVAL seconds otherwise."""

    def __init__(self, stream: "Callable[[str], object]", terminal: bool) -> None:
        self.write = stream
        self.terminal = terminal

    def text(self, index: int, count: int, level: Level, live: LiveCounts) -> str:
        elapsed = time.perf_counter() - live.started
        goal = (
            f"{elapsed:.0f}/{level.duration:g} s"
            if level.duration is not None
            else (f"{live.ok + live.failed}/{level.requests} requests")
        )
        rate = live.output_tokens / elapsed if elapsed > 0 else 0.0
        return (
            f"concurrency {level.concurrency} [{index}/{count}]: {goal}, {live.ok} ok, "
            f"{live.failed} failed, {rate:.1f} output tok/s"
        )

    async def follow(self, index: int, count: int, level: Level, live: LiveCounts) -> None:
        interval = PROGRESS_INTERVAL if self.terminal else PIPE_PROGRESS_INTERVAL
        while True:
            await asyncio.sleep(interval)
            line = self.text(index, count, level, live)
            self.write(f"\r\033[K{line}" if self.terminal else f"{line}\n")

    def done(self, result: LevelResult, index: int, count: int) -> None:
        line = (
            f"concurrency {result.concurrency} [{index}/{count}]: {result.requests} ok, "
            f"{result.failed} failed, {result.output_tokens_per_second:.1f} output tok/s, "
            f"TTFT p50 {seconds_text(result.ttft.p50)}"
        )
        self.write(f"\r\033[K{line}\n" if self.terminal else f"{line}\n")


async def measure(
    url: str,
    args: argparse.Namespace,
    *,
    target: str,
    model: str | None,
    progress: ProgressLine,
    fresh_connections: bool = False,
) -> BenchmarkRun:
    shape = _shape(args, model)
    body, prompt = _bodies(args, shape)
    duration = None if args.requests else args.duration
    levels = [Level(c, duration, args.requests, args.timeout) for c in args.concurrency]
    started = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    results: list[LevelResult] = []
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(30.0, args.timeout))
    async with aiohttp.ClientSession(
        connector=connector(fresh=fresh_connections), timeout=timeout, trace_configs=[tracing()]
    ) as http:
        index = 0
        if args.warmup:
            warm = Level(1, None, args.warmup, args.timeout)
            records = await run_level(http, url, body, stream=shape.stream, level=warm, live=LiveCounts())
            index += len(records)
            if not any(record.ok for record in records):
                said = "; ".join(
                    f"{kind}: {message}" if message else kind for kind, message in _failures(records).items()
                )
                raise UserError(f"{url} did not answer the warm-up request ({said})")
        for number, level in enumerate(levels, start=1):
            live = LiveCounts()
            cpu = time.process_time()
            follower = asyncio.ensure_future(progress.follow(number, len(levels), level, live))
            try:
                records = await run_level(
                    http, url, body, stream=shape.stream, level=level, live=live, first_index=index
                )
            finally:
                follower.cancel()
                with suppress(asyncio.CancelledError):
                    await follower
            index += len(records)
            result = summarize(level.concurrency, records, client_cpu_seconds=time.process_time() - cpu)
            progress.done(result, number, len(levels))
            results.append(result)
    settings = RunSettings(
        target=target,
        url=url,
        stream=shape.stream,
        prompt=prompt,
        max_tokens=shape.max_tokens,
        duration=duration,
        requests=args.requests,
    )
    return BenchmarkRun(settings=settings, levels=tuple(results), started=started)


def _failures(records: Sequence[RequestRecord]) -> dict[str, str]:
    """Each kind of failure, with what the server said of it (if anything)."""
    kinds = {record.error: "" for record in records if record.error is not None}
    return {**kinds, **first_messages(records)}


def _stderr_progress() -> ProgressLine:
    def write(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()

    return ProgressLine(write, sys.stderr.isatty())


def _show(runs: Sequence[tuple[str, BenchmarkRun]], args: argparse.Namespace) -> int:
    run = runs[-1][1]
    if args.output == "json":
        sys.stdout.write(json.dumps(to_document(run), indent=2) + "\n")
    else:
        for line in summary_lines(run):
            sys.stdout.write(line + "\n")
        render.emit(render.plain_table(LEVEL_HEADERS, level_rows(run.levels)))
    for level in run.levels:
        for kind, message in level.error_messages.items():
            count = level.errors.get(kind, 0)
            sys.stderr.write(
                f"at concurrency {level.concurrency}, {kind} ({count}x): the server said: {message}\n"
            )
        cpu = level.client_cpu_seconds
        if cpu is not None and level.seconds > 0 and cpu > CLIENT_BUSY_SHARE * level.seconds:
            sys.stderr.write(
                f"warning: at concurrency {level.concurrency} the benchmark itself kept a CPU "
                f"{cpu / level.seconds:.0%} busy: these figures may be limited by this machine\n"
            )
    if args.plot:
        write_plot(runs, Path(args.plot))
        sys.stderr.write(f"plot written to {args.plot}\n")
    return 0 if any(level.requests for level in run.levels) else 1


def _read_run(path: str) -> BenchmarkRun:
    try:
        return from_document(json.loads(Path(path).read_text()))
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror}") from None
    except ValueError as error:  # JSONDecodeError and ReportError
        raise UserError(f"{path}: {error}") from None


def compare(args: argparse.Namespace) -> int:
    old_path, new_path = args.compare
    old, new = _read_run(old_path), _read_run(new_path)
    rows = compare_rows(old, new)
    if not rows:
        raise UserError(f"{old_path} and {new_path} have no concurrency level in common")
    for label, run in ((old_path, old), (new_path, new)):
        sys.stdout.write(f"{label}: {run.settings.target}, {run.started}\n")
    render.emit(render.plain_table(COMPARE_HEADERS, rows))
    if args.plot:
        write_plot([(Path(old_path).stem, old), (Path(new_path).stem, new)], Path(args.plot))
        sys.stderr.write(f"plot written to {args.plot}\n")
    return 0


def run_offline(args: argparse.Namespace) -> int:
    """`--compare` and `--url`: no cluster is involved."""
    try:
        if args.compare:
            return compare(args)
        url = endpoint_url(args.url, args.endpoint)
        args, _ = _sized(args, None)
        run = asyncio.run(measure(url, args, target=url, model=args.model, progress=_stderr_progress()))
        return _show([(url, run)], args)
    except (UserError, ReportError) as error:
        print(f"error: {error}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 1


async def _served_model(http_url: str) -> str | None:
    """vLLM and TGI want the served model's id in each request; they list it on /v1/models."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
            http.get(http_url + "/v1/models") as answer,
        ):
            data = (await answer.json(content_type=None)).get("data") or []
    except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError):
        return None
    return str(data[0].get("id")) if data and isinstance(data[0], dict) else None


def _service_path(isvc: Obj, endpoint: str) -> str:
    spec = spec_of(isvc)
    configured = (
        spec.endpoint.path if spec and spec.endpoint and spec.endpoint.path else DEFAULT_ENDPOINT_PATH
    )
    if endpoint == "completions" and configured == DEFAULT_ENDPOINT_PATH:
        return PATHS["completions"]
    return configured


def _sized(args: argparse.Namespace, spec: InferenceServiceSpec | None) -> tuple[argparse.Namespace, Sizes]:
    """The run's prompt and answer sizes: the user's, else the defaults fitted to the service."""
    sizes = fitted_sizes(spec, args.prompt_tokens, args.max_tokens)
    if sizes.note and not args.prompt_file:
        sys.stderr.write(f"{args.name}: {sizes.note}\n")
    sized = argparse.Namespace(
        **{**vars(args), "prompt_tokens": sizes.prompt_tokens, "max_tokens": sizes.max_tokens}
    )
    return sized, sizes


async def _server_tokens(http: aiohttp.ClientSession, base_url: str, content: str) -> int | None:
    """llama.cpp's own count of a chat prompt's tokens, its template applied (/apply-template, then
    /tokenize); None from a server without them."""
    try:
        messages = {"messages": [{"role": "user", "content": content}]}
        async with http.post(f"{base_url}/apply-template", json=messages) as templated:
            prompt = (await templated.json(content_type=None)).get("prompt")
        async with http.post(f"{base_url}/tokenize", json={"content": prompt}) as tokenized:
            tokens = (await tokenized.json(content_type=None)).get("tokens")
    except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError):
        return None
    return len(tokens) if isinstance(prompt, str) and isinstance(tokens, list) else None


async def _fit_prompt(base_url: str, args: argparse.Namespace, sizes: Sizes) -> argparse.Namespace:
    """Synthetic prompts cut to what really fits the slot, counted by the server itself (a word may
    be several tokens of a small vocabulary, and the template adds its own)."""
    if sizes.slot is None or args.prompt_file or args.prompt_tokens is None:
        return args
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        template = await _server_tokens(http, base_url, "")
        words = args.prompt_tokens
        counted = await _server_tokens(http, base_url, synthetic_prompt(words, 0, args.seed))
    if template is None or counted is None or counted <= sizes.slot - args.max_tokens - 2:
        return args
    fitted = min(words, words_that_fit(sizes.slot, args.max_tokens, template, (words, counted - template)))
    said = f"{words} words of synthetic prompt are {counted - template} tokens to this server"
    sys.stderr.write(f"{args.name}: {said}: prompts of {fitted} words\n")
    return argparse.Namespace(**{**vars(args), "prompt_tokens": fitted})


async def run_benchmark(session: Session, args: argparse.Namespace) -> int:
    isvc = await get_service(session, args.name)
    spec = spec_of(isvc)
    args, sizes = _sized(args, spec)
    async with service_target(session, isvc, args.via, many_connections=True) as target:
        if sizes.note:
            args = await _fit_prompt(target.base_url, args, sizes)
        model = args.model
        if model is None and spec is not None and spec.runtime in ("vllm", "tgi"):
            model = await _served_model(target.base_url)
        where = (
            f"{target.via} (one replica: inside the cluster the Service spreads the load over all of them)"
            if target.via.startswith("port-forward")
            else f"its Service, {target.base_url}"
        )
        run = await measure(
            target.base_url + _service_path(isvc, args.endpoint),
            args,
            target=f"InferenceService {session.namespace}/{args.name} via {where}",
            model=model,
            progress=_stderr_progress(),
            fresh_connections=target.via.startswith("port-forward"),
        )
    return _show([(args.name, run)], args)
