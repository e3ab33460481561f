"""`llmkube`: one command, many jobs; this module only dispatches and does what every start needs.

llmkube controller   the controller against $KUBECONFIG / --kubeconfig / in-cluster config
                     (llmkube.process: flags, configuration, the command)
llmkube run          the controller; without a cluster it starts a local one first (a real node
                     serving a tiny llama.cpp model where it can: root on Linux; else kwok)
llmkube agent        the host agent: metal InferenceServices served by llama-server on this host
                     (llmkube.agent; installed with the package, imports nothing of the controller)
llmkube cluster      a local control plane only (for kubectl and tests)
                     (run and cluster: llmkube.devcli, developer commands; not in the image)
llmkube router       one ModelRouter's OpenAI-compatible endpoint (the Deployment the controller
                     makes for it runs this; llmkube.router)
llmkube crds         print the CustomResourceDefinitions
llmkube version      print the version

and the commands for users (llmkube.usercli): deploy, list, status, queue, scale, delete, cache,
catalog, logs, chat, curl, benchmark, completion. `--help` lists them first (COMMAND_GROUPS).
"""

import argparse
import gc
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from typing import Any

from llmkube import __version__
from llmkube.process.flags import add_controller_flags


def _print_crds(_: argparse.Namespace) -> int:
    from llmkube.api.crds import all_crds
    from llmkube.api.manifests import to_yaml

    sys.stdout.write(to_yaml(all_crds()))
    return 0


def _print_version(_: argparse.Namespace) -> int:
    print(f"llmkube {__version__}")
    return 0


def load_controller_modules(log_format: str) -> None:
    """Import the controller; without rich when its logs are JSON lines.

    structlog imports rich whenever it is installed (it is: the user commands draw with it), for
    the console renderer's tracebacks; JSON lines never use it. In a fresh process, before anything
    has imported structlog, rich is marked absent (None in sys.modules: an import of it raises
    ImportError, as if it were not installed): ~30 ms of CPU and 3 MiB less at every start."""
    console = log_format == "console" or (log_format == "auto" and sys.stderr.isatty())
    if not console and "structlog" not in sys.modules:
        sys.modules.setdefault("rich", None)  # type: ignore[arg-type]
    for module in CONTROLLER_MODULES:
        importlib.import_module(module)


#: `llmkube --help` lists the commands in these groups, users' first (as kubectl groups its own)
COMMAND_GROUPS = (
    (
        "Commands for users of a cluster",
        (
            *("deploy", "list", "status", "queue", "scale", "delete", "cache", "catalog", "logs"),
            *("chat", "curl", "benchmark", "completion"),
        ),
    ),
    (
        "Commands that run llmkube (what its Deployments and hosts run)",
        ("controller", "router", "agent", "crds"),
    ),
    ("Developer commands (from a checkout)", ("cluster", "run")),
    ("Other commands", ("version",)),
)


def grouped_commands(helps: Sequence[tuple[str, str]], groups: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The command list of `--help`, group by group; a command no group names goes to the last
    group, so none is ever left out. `helps` is (name as shown, help) with aliases shown as
    `list (ls)`."""
    shown = {name.split(" ", 1)[0]: (name, text) for name, text in helps}
    placed: set[str] = set()
    lines: list[str] = []
    width = max((len(name) for name, _ in helps), default=0) + 2
    for index, (title, names) in enumerate(groups):
        members = [name for name in names if name in shown]
        if index == len(groups) - 1:
            members += [name for name in shown if name not in placed and name not in members]
        members = [name for name in members if name not in placed]
        if not members:
            continue
        lines.append(f"{title}:")
        for name in members:
            label, text = shown[name]
            lines.append(f"  {label.ljust(width)}{text}")
            placed.add(name)
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def _group_commands_in_help(parser: argparse.ArgumentParser, sub: "argparse._SubParsersAction[Any]") -> None:
    # argparse lists subcommands in one flat block: the help text of each is moved to the grouped
    # description and the flat block is emptied.
    helps = [(str(action.metavar or action.dest), action.help or "") for action in sub._choices_actions]
    parser.description = f"{parser.description}\n\n{grouped_commands(helps, COMMAND_GROUPS)}"
    sub._choices_actions.clear()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmkube",
        description="Kubernetes operator for LLM inference.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"llmkube {__version__}")
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help='one of those above; "llmkube COMMAND --help" for its flags',
    )

    sub.add_parser("version", help="print the version").set_defaults(func=_print_version)
    sub.add_parser("crds", help="print the CustomResourceDefinitions as YAML").set_defaults(func=_print_crds)

    from llmkube.process.command import run_controller

    controller = sub.add_parser("controller", help="run the controller against the configured cluster")
    add_controller_flags(controller)
    controller.set_defaults(func=run_controller, starts_controller=True)

    from llmkube.router.command import run_router
    from llmkube.router.flags import add_router_flags

    router = sub.add_parser("router", help="serve one ModelRouter's endpoint (what its Deployment runs)")
    add_router_flags(router)
    router.set_defaults(func=run_router)

    from llmkube.agent.command import run_agent
    from llmkube.agent.flags import add_agent_flags

    agent = sub.add_parser("agent", help="serve metal InferenceServices from this host (llama-server)")
    add_agent_flags(agent)
    agent.set_defaults(func=run_agent)

    # The developer's commands, where they are installed (the controller image leaves them out).
    if importlib.util.find_spec("llmkube.devcli") is not None:
        from llmkube.devcli import add_developer_commands

        add_developer_commands(sub)

    from llmkube.usercli import add_global_flags, add_user_commands

    add_global_flags(parser)  # -n, --kubeconfig, --context before the command, as kubectl's
    add_user_commands(sub)
    _group_commands_in_help(parser, sub)
    return parser


#: What the controller commands import before they start: loaded by `main` with the GC paused.
CONTROLLER_MODULES = ("llmkube.manager", "llmkube.controllers.setup")


def parse_and_load(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line parsed and, for the controller commands, the controller imported: what
    every start does before the command runs (bench/bench_import_cost.py measures exactly this)."""
    # Start-up creates ~60,000 GC-tracked objects (modules, classes, pydantic validators) that live
    # as long as the process, and little cyclic garbage: every collection on the way traverses them
    # all again, ~35 of the ~550 ms of CPU the controller's imports take. Collect once they are in.
    collecting = gc.isenabled()
    gc.disable()
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "starts_controller", False):
            load_controller_modules(args.log_format)
    finally:
        if collecting:
            gc.enable()
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_and_load(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
