"""`llmkube deploy|list|status|queue|scale|delete|cache|logs|chat|curl`: commands for the people
who use llmkube, built on the controller's own API client. The same commands run as a kubectl plugin
(`kubectl llmkube ...`, from the `kubectl-llmkube` executable this package installs).

Modules: `manifests` and `views` decide (pure); `render` draws; one module per command family
(`deploy`, `inspect`, `scale`, `delete`, `cache`, `logs`, `request`, `completion`); `parser` holds
the flags, `jsonpath` reads `-o jsonpath=` templates, `unreachable` says why a cluster did not answer.
"""

import argparse
import sys
from collections.abc import Sequence

from llmkube import __version__
from llmkube.usercli.parser import add_global_flags, add_user_commands

__all__ = ["add_global_flags", "add_user_commands", "kubectl_plugin_main"]


def kubectl_plugin_main(argv: Sequence[str] | None = None) -> int:
    """`kubectl llmkube ...`: kubectl finds `kubectl-llmkube` on PATH and passes the rest."""
    parser = argparse.ArgumentParser(
        prog="kubectl llmkube", description="Deploy, inspect and talk to llmkube inference services."
    )
    parser.add_argument("--version", action="version", version=f"llmkube {__version__}")
    add_global_flags(parser)
    add_user_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(kubectl_plugin_main())
