"""The user commands' arguments (every flag has help text) and the runner that connects, runs one
command, and turns any failure into one line on stderr and exit status 1 (a usage error is
argparse's, status 2). The connection flags go before or after the command, as kubectl's do."""

import argparse
import asyncio
import importlib
import importlib.util
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, get_args

from llmkube.api.enums import CacheType, GPUVendor, Priority, Runtime
from llmkube.kube.errors import ApiError
from llmkube.usercli.errors import NotFoundError, UserError, explain
from llmkube.usercli.kinds import MODEL_KINDS, SERVICE_KINDS

if TYPE_CHECKING:
    from llmkube.usercli.session import Session

Command = Callable[["Session", argparse.Namespace], Awaitable[int]]

# The schema's own enums: a value the CRD would refuse is refused here, before any request.
CACHE_TYPES: tuple[str, ...] = get_args(CacheType)
RUNTIMES: tuple[str, ...] = get_args(Runtime)
PRIORITIES: tuple[str, ...] = get_args(Priority)
GPU_VENDORS: tuple[str, ...] = get_args(GPUVendor)


def later(module: str, name: str) -> Command:
    """The command ``name`` of ``module``, imported when it runs: building the parser (as
    `llmkube controller` does at every start) imports none of the commands (tables, progress,
    memory estimates). The module is looked up now, so a misspelt one fails at once."""
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(module)

    async def command(session: "Session", args: argparse.Namespace) -> int:
        function: Command = getattr(importlib.import_module(module), name)
        return await function(session, args)

    return command


def fail(message: str) -> None:
    """The one line on stderr a failed command prints (a server's message may span lines)."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr)


def run_command(command: Command) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        # The client (aiohttp, structlog) is loaded here, when a user command runs: building the
        # parser, as every `llmkube` start does, stays light (the controller decides what to load).
        from llmkube.kube.errors import NotFound
        from llmkube.kube.rest.config import ConfigError
        from llmkube.kube.rest.transport import TransportError
        from llmkube.usercli.crds_check import crds_not_installed, missing_crds
        from llmkube.usercli.session import open_session
        from llmkube.usercli.unreachable import Unreachable

        async def main() -> int:
            async with open_session(args.kubeconfig, args.context, args.namespace) as session:
                try:
                    return await command(session, args)
                except TransportError as error:
                    raise Unreachable(session.config.host, error) from error
                except (UserError, ApiError) as error:
                    # A 404 may be the kinds themselves missing: discovery says which it is.
                    not_found = isinstance(error, (NotFound, NotFoundError)) or isinstance(
                        error.__cause__, NotFound
                    )
                    if not_found and (missing := await missing_crds(session)):
                        raise UserError(
                            crds_not_installed(session.config.host, args.context, missing)
                        ) from error
                    raise

        try:
            return asyncio.run(main())
        except UserError as error:
            fail(str(error))
        except ApiError as error:
            fail(str(explain(error, "the API server refused the request")))
        except Unreachable as error:
            fail(str(error))
        except ConfigError as error:  # no kubeconfig, an unknown --context, a file that cannot be read
            fail(f"kubeconfig: {error}")
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        return 1

    return run


def _connection_flags(parser: argparse.ArgumentParser) -> None:
    """-n, --kubeconfig and --context, after the command (`llmkube list -n ml`); before it they are
    the global flags (`llmkube -n ml list`, add_global_flags). Unset here they leave the global
    value alone (argparse would otherwise overwrite it with this parser's default)."""
    _add_connection_flags(parser.add_argument_group("cluster"), default=argparse.SUPPRESS)


def _add_connection_flags(group: Any, *, default: Any) -> None:
    group.add_argument(
        "-n",
        "--namespace",
        default=default,
        help="namespace (default: the kubeconfig context's, else default)",
    )
    group.add_argument(
        "--kubeconfig", default=default, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )
    group.add_argument(
        "--context", default=default, help="kubeconfig context to use (default: the current one)"
    )


def add_global_flags(parser: argparse.ArgumentParser) -> None:
    """The connection flags of the top-level parser, as kubectl takes them before the verb (and the
    parser itself, which `completion` reads its commands from)."""
    _add_connection_flags(parser.add_argument_group("cluster (before or after the command)"), default=None)
    parser.set_defaults(root_parser=parser)


def output_format(choices: tuple[str, ...]) -> Callable[[str], str]:
    """An `-o` value: one of `choices`, or `jsonpath=TEMPLATE` when `choices` has "jsonpath" (the
    template is parsed here, so a bad one is a usage error before anything is read)."""

    def parse(text: str) -> str:
        if text.startswith("jsonpath=") and "jsonpath" in choices:
            from llmkube.usercli.jsonpath import JSONPathError
            from llmkube.usercli.jsonpath import parse as parse_template

            try:
                parse_template(text.partition("=")[2])
            except JSONPathError as error:
                raise argparse.ArgumentTypeError(f"jsonpath: {error}") from None
            return text
        if text in choices:
            return text
        shown = [c if c != "jsonpath" else "jsonpath=TEMPLATE" for c in choices]
        raise argparse.ArgumentTypeError(f'"{text}": use one of {", ".join(shown)}')

    parse.__name__ = "output format"  # what argparse calls the type in its messages
    return parse


def _output_flag(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("json", "yaml")) -> None:
    shown = ", ".join(c if c != "jsonpath" else "jsonpath=TEMPLATE" for c in choices)
    parser.add_argument(
        "-o", "--output", type=output_format(choices), metavar="FORMAT", help=f"output format: {shown}"
    )


def _watch_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("-w", "--watch", action="store_true", help=f"{what}; Ctrl-C ends it")


def _no_headers_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-headers", action="store_true", help="tables without their header line")


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f'"{text}" must be KEY=VALUE')
    return key, value


def _deploy(sub: Any) -> None:
    p = sub.add_parser(
        "deploy",
        help="create a Model and an InferenceService, and wait until they serve",
        description="Create (or update) a Model and an InferenceService named after the model, then "
        "wait until it is Ready, showing progress. With --dry-run, print them for GitOps instead.",
    )
    p.add_argument(
        "source",
        help="model source: https://.../file.gguf, /path, file://..., pvc://claim/path, hf://org/repo, "
        "org/repo, org/repo:Q4_K_M (a GGUF repository and the quantization to serve), s3://bucket/key, or "
        "an id of the catalog (llmkube catalog list)",
    )
    p.add_argument("--name", help="name of both objects (default: made from the source's file name)")
    p.add_argument("--runtime", choices=RUNTIMES, help="serving runtime (default: llamacpp)")
    p.add_argument(
        "--image",
        help="container image (default: the controller's for the runtime and GPU: llama.cpp's CUDA, ROCm "
        "or SYCL build with --gpu)",
    )
    p.add_argument("--gpu", type=int, default=0, metavar="N", help="GPUs per replica (default: 0, CPU)")
    p.add_argument(
        "--gpu-vendor",
        choices=GPU_VENDORS,
        default="nvidia",
        help="GPU vendor (default: nvidia)",
    )
    p.add_argument("--gpu-layers", type=int, help="layers to offload to the GPU (-1: all; default: all)")
    p.add_argument("--gpu-memory", help="GPU memory per device, e.g. 24Gi (informs the memory-fit check)")
    p.add_argument("--cpu", help="CPU request, e.g. 2 or 500m")
    p.add_argument("--memory", help="memory request and limit, e.g. 8Gi")
    p.add_argument("-r", "--replicas", type=int, help="replicas (default: 1)")
    p.add_argument("--min-replicas", type=int, help="autoscaling lower bound (needs --max-replicas)")
    p.add_argument("--max-replicas", type=int, help="turn autoscaling on, up to this many replicas")
    p.add_argument("--context-size", "--ctx", dest="context_size", type=int, help="context window in tokens")
    p.add_argument("--parallel", type=int, help="parallel request slots (llama.cpp --parallel)")
    p.add_argument("--cache-type-k", choices=CACHE_TYPES, help="KV cache type for K (e.g. q8_0 halves it)")
    p.add_argument("--cache-type-v", choices=CACHE_TYPES, help="KV cache type for V")
    p.add_argument("--flash-attn", action="store_true", help="enable flash attention (GPU)")
    p.add_argument(
        "--priority", choices=PRIORITIES, help="GPU queue and preemption priority (default: normal)"
    )
    p.add_argument(
        "--quantization",
        help="the quantization to serve from a Hugging Face repository of GGUF files (as org/repo:Q4_K_M), "
        "else an informational label",
    )
    p.add_argument(
        "--file",
        action="append",
        metavar="PATH",
        help="the file of the repository to serve (repeatable: shards, the first loaded); default: the "
        "GGUF file of the quantization asked for, or the only one",
    )
    p.add_argument("--sha256", help="expected SHA-256 of the model file")
    p.add_argument("--port", type=int, help="port the endpoint listens on (default: 8080)")
    p.add_argument("--extra-arg", action="append", metavar="ARG", help="extra runtime argument (repeatable)")
    p.add_argument("--env", action="append", metavar="KEY=VALUE", help="environment variable (repeatable)")
    p.add_argument(
        "--annotation",
        dest="annotations",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="annotation on the InferenceService (repeatable), e.g. "
        "inference.llmkube.dev/memory-fit=enforce to refuse to start what cannot fit",
    )
    p.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        choices=("client", "server"),
        help="print the objects instead of creating them (server: also have the API server validate them)",
    )
    p.add_argument(
        "--enforce-memory-fit",
        action="store_true",
        help="refuse to start it when the memory estimate says it cannot fit (sets the "
        "inference.llmkube.dev/memory-fit=enforce annotation; without it a misfit is only a warning)",
    )
    p.add_argument(
        "--fit-wait",
        type=float,
        default=30.0,
        help="seconds to wait for the Model's metadata for the memory-fit check (0 skips it; default 30)",
    )
    p.add_argument("--no-wait", action="store_true", help="return once the objects are applied")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for Ready (default: 600)")
    _output_flag(p)
    _connection_flags(p)
    connected = run_command(later("llmkube.usercli.deploy", "run_deploy"))

    def deploy(args: argparse.Namespace) -> int:
        if args.dry_run == "client":  # no cluster needed to print the objects
            from llmkube.usercli.deploy import print_offline

            try:
                return print_offline(args)
            except UserError as error:
                fail(str(error))
                return 1
        return connected(args)

    p.set_defaults(func=deploy)


def _inspect(sub: Any) -> None:
    p = sub.add_parser("list", aliases=["ls"], help="list InferenceServices (or Models)")
    p.add_argument(
        "kind", nargs="?", default="services", choices=(*SERVICE_KINDS, *MODEL_KINDS), help="what to list"
    )
    p.add_argument("-A", "--all-namespaces", action="store_true", help="list across all namespaces")
    p.add_argument("-l", "--selector", help="label selector, e.g. team=ml,tier!=batch (as kubectl's -l)")
    _watch_flag(p, "after the list, print a line for every change (as kubectl get -w)")
    _no_headers_flag(p)
    _output_flag(p, ("wide", "name", "json", "yaml", "jsonpath"))
    _connection_flags(p)
    p.set_defaults(func=run_command(later("llmkube.usercli.inspect", "run_list")))

    p = sub.add_parser("status", help="everything about one service: phase, why, model, conditions, events")
    p.add_argument("name", help="InferenceService name")
    _watch_flag(p, "show it again whenever the service or its Model changes")
    _output_flag(p, ("wide", "name", "json", "yaml", "jsonpath"))
    _connection_flags(p)
    p.set_defaults(func=run_command(later("llmkube.usercli.inspect", "run_status")))

    p = sub.add_parser("queue", help="the cluster-wide GPU queue, in order")
    p.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="accepted out of kubectl habit: the queue is always cluster-wide (one pool of GPUs)",
    )
    p.add_argument("-l", "--selector", help="only InferenceServices with these labels (as kubectl's -l)")
    _no_headers_flag(p)
    _output_flag(p)
    _connection_flags(p)
    p.set_defaults(func=run_command(later("llmkube.usercli.inspect", "run_queue")))


def _manage(sub: Any) -> None:
    p = sub.add_parser("scale", help="set the replica count (or the autoscaling bounds)")
    p.add_argument("name", help="InferenceService name")
    p.add_argument("replicas", type=int, nargs="?", help="replicas (0 stops the service)")
    p.add_argument("--min", dest="min_replicas", type=int, help="autoscaling lower bound")
    p.add_argument("--max", dest="max_replicas", type=int, help="autoscaling upper bound")
    _connection_flags(p)
    p.set_defaults(func=run_command(later("llmkube.usercli.scale", "run_scale")))

    p = sub.add_parser("delete", aliases=["rm"], help="delete a service and its Model")
    p.add_argument("name", help="InferenceService name")
    p.add_argument("--keep-model", action="store_true", help="delete only the InferenceService")
    _connection_flags(p)
    p.set_defaults(func=run_command(later("llmkube.usercli.delete", "run_delete")))


def _cache(sub: Any) -> None:
    p = sub.add_parser(
        "cache", help="the namespaces' model caches: what they hold, prefetch or clear a Model"
    )
    cache = p.add_subparsers(dest="cache_command", metavar="{list,preload,clear}", required=True)
    q = cache.add_parser("list", aliases=["ls"], help="what each cache holds, and which services use it")
    q.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace's cache")
    q.add_argument("-l", "--selector", help="only Models with these labels (as kubectl's -l)")
    _output_flag(q)
    _connection_flags(q)
    q.set_defaults(func=run_command(later("llmkube.usercli.cache", "run_cache_list")))
    q = cache.add_parser("preload", help="download a Model into the cache before a service needs it")
    q.add_argument("model", help="Model name (sets spec.prefetch: true)")
    _connection_flags(q)
    q.set_defaults(func=run_command(later("llmkube.usercli.cache", "run_cache_preload")))
    q = cache.add_parser(
        "clear",
        help="remove a Model's files from the namespace's cache (refused while a service uses it)",
        description="Ask the controller to remove the Model's files from the namespace's model cache "
        "claim (a Job it owns does, no pod is exec'ed into) and wait for its answer. Refused while an "
        "InferenceService names the Model, unless --force (its running pods keep the files they "
        "opened; the next pod downloads them again). Sets spec.prefetch: false when it was true.",
    )
    q.add_argument("model", help="Model name")
    q.add_argument("--force", action="store_true", help="clear it even while services use it")
    q.add_argument("--no-wait", action="store_true", help="return once the request is made")
    q.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the controller (default: 120)"
    )
    _connection_flags(q)
    q.set_defaults(func=run_command(later("llmkube.usercli.cache", "run_cache_clear")))


def _catalog(sub: Any) -> None:
    p = sub.add_parser(
        "catalog",
        help="well-known GGUF models to deploy by id, with the memory each needs",
        description="The catalog shipped with llmkube: well-known GGUF models (facts from their public "
        "model cards) and the memory the controller's estimator says each needs. "
        "`llmkube deploy ID` deploys one. No cluster is needed.",
    )
    catalog = p.add_subparsers(dest="catalog_command", metavar="{list,info}", required=True)
    q = catalog.add_parser("list", aliases=["ls"], help="every model of the catalog")
    _no_headers_flag(q)
    _output_flag(q, ("wide", "name", "json", "yaml"))
    q.set_defaults(func=_offline("llmkube.usercli.catalog.command", "run_catalog_list"))
    q = catalog.add_parser("info", help="one model in full: files, architecture, memory on CPU and GPU")
    q.add_argument("id", help="catalog id (see llmkube catalog list)")
    _output_flag(q)
    q.set_defaults(func=_offline("llmkube.usercli.catalog.command", "run_catalog_info"))


def _offline(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """A command that needs no cluster, imported when it runs."""
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(module)

    def run(args: argparse.Namespace) -> int:
        function: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), name)
        return function(args)

    return run


def _use(sub: Any) -> None:
    p = sub.add_parser("logs", help="the serving container's logs of every replica")
    p.add_argument("name", help="InferenceService name")
    p.add_argument("-f", "--follow", action="store_true", help="keep streaming new lines")
    p.add_argument("--tail", type=int, help="only the last N lines of each replica")
    p.add_argument("--timestamps", action="store_true", help="prefix each line with its time")
    p.add_argument("--previous", action="store_true", help="the previous (crashed) container's logs")
    p.add_argument("--download", action="store_true", help="the model-downloader init container instead")
    p.add_argument("--pod", help="only this pod")
    _connection_flags(p)
    p.set_defaults(func=run_command(later("llmkube.usercli.logs", "run_logs")))

    via_help = "how to reach the service: auto (port-forward outside the cluster), port-forward, direct"
    p = sub.add_parser("chat", help="send one chat message and print the answer")
    p.add_argument("name", help="InferenceService name")
    p.add_argument("message", help="what to say")
    p.add_argument("--system", help="a system prompt")
    p.add_argument("--max-tokens", type=int, default=256, help="answer length limit (default: 256)")
    p.add_argument("--model", help="model id in the request (default: asked from /v1/models for vLLM/TGI)")
    p.add_argument("--via", choices=("auto", "port-forward", "direct"), default="auto", help=via_help)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the answer")
    p.add_argument(
        "--no-stream", action="store_true", help="wait for the whole answer (-o json and -o yaml always do)"
    )
    _output_flag(p)
    _connection_flags(p)
    p.set_defaults(func=run_command(later("llmkube.usercli.request", "run_chat")))

    p = sub.add_parser("curl", help="send one HTTP request to the service and print the answer")
    p.add_argument("name", help="InferenceService name")
    p.add_argument("path", nargs="?", default="/health", help="request path (default: /health)")
    p.add_argument("-X", "--request", help="HTTP method (default: GET, or POST with -d)")
    p.add_argument("-d", "--data", help="request body (JSON unless -H sets Content-Type)")
    p.add_argument("-H", "--header", action="append", help='request header "Name: value" (repeatable)')
    p.add_argument("-i", "--include", action="store_true", help="print the status line and headers too")
    p.add_argument("--via", choices=("auto", "port-forward", "direct"), default="auto", help=via_help)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the answer")
    _connection_flags(p)
    p.set_defaults(func=run_command(later("llmkube.usercli.request", "run_curl")))


def concurrency_levels(text: str) -> list[int]:
    """`1,4,16` -> [1, 4, 16] (a bad list is a usage error)."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f'"{text}" is not a list of numbers like 1,4,16') from None
    if not levels or any(level < 1 for level in levels):
        raise argparse.ArgumentTypeError(f'"{text}": each concurrency level must be 1 or more')
    return levels


def _benchmark(sub: Any) -> None:
    p = sub.add_parser(
        "benchmark",
        help="measure what a service delivers under concurrent load",
        description="Send OpenAI-style requests to an InferenceService (or any OpenAI-compatible URL "
        "with --url) at each concurrency level in turn, and report per level: requests/s, output "
        "tokens/s, time to first token (TTFT) and time per output token (TPOT) p50/p90/p99, and errors "
        "by kind. --compare OLD.json NEW.json sets two saved runs (-o json) side by side.",
    )
    p.add_argument("name", nargs="?", help="InferenceService name (or use --url)")
    p.add_argument(
        "--url", help="an OpenAI-compatible base URL instead, e.g. http://host:8080 (a router too)"
    )
    p.add_argument(
        "-c",
        "--concurrency",
        type=concurrency_levels,
        default=[1],
        metavar="N[,N...]",
        help="concurrent requests; a list sweeps them in order, e.g. 1,4,16 (default: 1)",
    )
    amount = p.add_mutually_exclusive_group()
    amount.add_argument(
        "--duration", type=float, default=30.0, metavar="SECONDS", help="length of each level (default: 30)"
    )
    amount.add_argument("--requests", type=int, metavar="N", help="requests per level instead of a duration")
    p.add_argument(
        "--prompt-tokens",
        type=int,
        metavar="N",
        help="synthetic prompts of about N tokens (default: 128, less when a service's slot is smaller)",
    )
    p.add_argument(
        "--prompt-file",
        metavar="FILE",
        help='prompts, one per line (or JSON lines with "prompt" or "messages"), used in turn',
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="output tokens per request (default: 128, less when a service's slot is smaller)",
    )
    p.add_argument("--no-stream", action="store_true", help="ask for whole answers (no TTFT or TPOT then)")
    p.add_argument(
        "--no-ignore-eos",
        action="store_true",
        help="let the model stop before --max-tokens (by default ignore_eos is sent: all answers as long)",
    )
    p.add_argument("--endpoint", choices=("chat", "completions"), default="chat", help="API (default: chat)")
    p.add_argument(
        "--model", help="model id in the requests (default: asked from /v1/models for vLLM and TGI)"
    )
    p.add_argument("--temperature", type=float, help="sampling temperature (default: the server's)")
    p.add_argument(
        "--warmup", type=int, default=1, metavar="N", help="requests sent first, not counted (default: 1)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic prompts (default: 0)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds for one request (default: 300)")
    p.add_argument(
        "--via",
        choices=("auto", "port-forward", "direct"),
        default="auto",
        help="how to reach the service: auto (a port-forward to one Ready pod outside the cluster, the "
        "Service inside it), port-forward, direct",
    )
    p.add_argument("--plot", metavar="FILE.png", help="also draw throughput and latency against concurrency")
    p.add_argument(
        "--compare", nargs=2, metavar=("OLD.json", "NEW.json"), help="compare two runs saved with -o json"
    )
    p.add_argument("-o", "--output", choices=("json",), help="print the run as JSON (what --compare reads)")
    _connection_flags(p)
    connected = run_command(later("llmkube.usercli.benchmark.command", "run_benchmark"))

    def benchmark(args: argparse.Namespace) -> int:
        if args.compare or args.url:
            from llmkube.usercli.benchmark.command import run_offline

            return run_offline(args)
        if not args.name:
            print(
                "error: name an InferenceService, or give --url (or --compare OLD.json NEW.json)",
                file=sys.stderr,
            )
            return 1
        return connected(args)

    p.set_defaults(func=benchmark)


def add_user_commands(sub: Any) -> None:
    """Add deploy, list, status, queue, scale, delete, cache, catalog, logs, chat, curl, benchmark
    and completion to a subparsers object."""
    for register in (_deploy, _inspect, _manage, _cache, _catalog, _use, _benchmark):
        register(sub)
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print the completion script of a shell. Load it in the current shell with "
        "`source <(llmkube completion bash)` (zsh: the same with zsh); for every new shell, add that "
        "line to ~/.bashrc or ~/.zshrc; fish: llmkube completion fish > "
        "~/.config/fish/completions/llmkube.fish.",
    )
    p.add_argument(
        "shell",
        choices=("bash", "zsh", "fish", "namespaces", "contexts"),
        help="the shell (namespaces, contexts: the names the scripts offer after -n and --context)",
    )
    _connection_flags(p)
    namespaces = run_command(later("llmkube.usercli.completion_names", "run_namespaces"))

    def complete(args: argparse.Namespace) -> int:
        if args.shell == "namespaces":
            return namespaces(args)
        if args.shell == "contexts":
            from llmkube.usercli.completion_names import run_contexts

            return run_contexts(args)
        return _print_completion(args)

    p.set_defaults(func=complete)


def _print_completion(args: argparse.Namespace) -> int:
    from llmkube.usercli.completion import completion_script

    sys.stdout.write(completion_script(args.shell, args.root_parser))
    return 0
