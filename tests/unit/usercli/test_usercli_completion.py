"""`llmkube completion`: what the scripts are made of is read from the command line's own parser
(pure), so every command, alias and flag of the installed version is in them. The scripts
themselves run in bash, zsh and fish in tests/e2e/test_usercli_kubectl_habits.py."""

import argparse
from pathlib import Path

import pytest

from llmkube.cli import build_parser, main
from llmkube.usercli.completion import NAME_COMMANDS, Command, commands, completion_script
from llmkube.usercli.completion_names import context_names
from llmkube.usercli.kinds import MODEL_KINDS, SERVICE_KINDS
from llmkube.usercli.parser import RUNTIMES


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def by_name() -> dict[str, Command]:
    return {command.name: command for command in commands(build_parser())[1]}


def test_every_command_and_every_flag_of_the_parser_is_known() -> None:
    parser = build_parser()
    found = by_name()
    assert set(found) == set(subcommands(parser))
    for name, sub in subcommands(parser).items():
        flags = {opt for action in sub._actions for opt in action.option_strings}
        assert set(found[name].flags) == flags, name


def test_the_connection_flags_are_global_and_take_a_value() -> None:
    top, _ = commands(build_parser())
    assert {"-n", "--namespace", "--kubeconfig", "--context"} <= set(top)
    listing = by_name()["list"]
    assert {"-n", "--kubeconfig", "--context", "-l", "-o"} <= set(listing.valued)
    assert not {"-w", "-A", "--no-headers"} & set(listing.valued)


@pytest.mark.parametrize(
    ("command", "choices"),
    [
        ("list", (*SERVICE_KINDS, *MODEL_KINDS)),
        ("completion", ("bash", "zsh", "fish", "namespaces", "contexts")),
    ],
)
def test_positional_choices(command: str, choices: tuple[str, ...]) -> None:
    assert by_name()[command].choices == choices


def test_service_names_are_offered_where_the_first_argument_is_one() -> None:
    """NAME_COMMANDS is exactly the user commands whose first positional argument is `name`."""
    takes_name = set()
    for name, sub in subcommands(build_parser()).items():
        positionals = [a for a in sub._actions if not a.option_strings and a.nargs != 0]
        if positionals and positionals[0].dest == "name":
            takes_name.add(name)
    assert takes_name == NAME_COMMANDS
    assert {name for name, command in by_name().items() if command.takes_name} == takes_name


def test_flag_choices() -> None:
    assert dict(by_name()["deploy"].flag_choices)["--runtime"] == RUNTIMES


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_names_every_command(shell: str) -> None:
    script = completion_script(shell, build_parser())
    for name in by_name():
        assert (f"    {name})" if shell != "fish" else f"-a {name}") in script, (shell, name)
    if shell == "zsh":
        assert script.startswith("autoload -U +X compinit")


def test_contexts_are_read_from_the_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: b\n"
        "contexts: [{name: prod, context: {cluster: c}}, {name: b, context: {cluster: c}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    )
    assert context_names(str(kubeconfig)) == ["b", "prod"]
    assert main(["completion", "contexts", "--kubeconfig", str(kubeconfig)]) == 0
    assert capsys.readouterr().out == "b prod\n"
    assert context_names(str(tmp_path / "absent")) == []


def test_the_scripts_complete_namespaces_and_contexts() -> None:
    bash = completion_script("bash", build_parser())
    assert '-n|--namespace) COMPREPLY=($(compgen -W "$(llmkube completion namespaces $conn' in bash
    assert '--context) COMPREPLY=($(compgen -W "$(llmkube completion contexts $conn' in bash
    fish = completion_script("fish", build_parser())
    assert "complete -c llmkube -s n -l namespace -r -a '(__llmkube_conn_names namespaces)'" in fish
