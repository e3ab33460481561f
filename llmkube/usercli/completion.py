"""`llmkube completion bash|zsh|fish`: a completion script made from the command line's own parser,
so it knows every command, alias and flag the installed version has (pure: parser in, text out).

Beyond the words of the parser it completes, like kubectl, what is in the cluster: the
InferenceService names after `status`, `logs`, `chat`, `curl`, `scale`, `delete`, `benchmark` (asked with
`llmkube list -o jsonpath=...`, in the namespace and context already typed), the kinds of `list`,
the namespaces after `-n` and the kubeconfig's contexts after `--context` (`llmkube completion
namespaces|contexts`, with the connection already typed), and files after `--kubeconfig`. zsh uses
the bash function through bashcompinit.
"""

import argparse
import shlex
from dataclasses import dataclass

#: Commands whose first argument is an InferenceService's name.
NAME_COMMANDS = frozenset({"status", "logs", "chat", "curl", "scale", "delete", "rm", "benchmark"})
_NAMES = "llmkube list -o 'jsonpath={.items[*].metadata.name}'"
_NAMESPACES = "llmkube completion namespaces"
_CONTEXTS = "llmkube completion contexts"
_TAKES_VALUE_GLOBAL = ("-n", "--namespace", "--kubeconfig", "--context")


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    flags: tuple[str, ...]
    # flags that take a value (their next word is not a command or a name)
    valued: tuple[str, ...]
    # the choices of its first positional argument (list's kinds, completion's shells)
    choices: tuple[str, ...]
    takes_name: bool
    # the choices of the flags that have some (--runtime, --priority, ...)
    flag_choices: tuple[tuple[str, tuple[str, ...]], ...] = ()


def commands(parser: argparse.ArgumentParser) -> tuple[tuple[str, ...], tuple[Command, ...]]:
    """The top-level flags, and every command (aliases as commands of their own)."""
    top_flags = tuple(opt for action in parser._actions for opt in action.option_strings)
    found: list[Command] = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            flags: list[str] = []
            valued: list[str] = []
            flag_choices: list[tuple[str, tuple[str, ...]]] = []
            choices: tuple[str, ...] = ()
            for sub_action in sub._actions:
                if sub_action.option_strings:
                    flags += sub_action.option_strings
                    if sub_action.nargs != 0:
                        valued += sub_action.option_strings
                    if sub_action.choices:
                        options = tuple(str(c) for c in sub_action.choices)
                        flag_choices += [(flag, options) for flag in sub_action.option_strings]
                elif sub_action.choices and not choices:
                    choices = tuple(str(c) for c in sub_action.choices)
            help_text = helps.get(name) or next((h for n, h in helps.items() if action.choices[n] is sub), "")
            found.append(
                Command(
                    name,
                    help_text,
                    tuple(flags),
                    tuple(valued),
                    choices,
                    name in NAME_COMMANDS,
                    tuple(flag_choices),
                )
            )
    return top_flags, tuple(found)


def completion_script(shell: str, parser: argparse.ArgumentParser, prog: str = "llmkube") -> str:
    top_flags, found = commands(parser)
    if shell == "fish":
        return _fish(prog, top_flags, found)
    script = _bash(prog, top_flags, found)
    if shell == "zsh":
        return "autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n" + script
    return script


def _words(items: tuple[str, ...] | list[str]) -> str:
    return shlex.quote(" ".join(items))


def _bash(prog: str, top_flags: tuple[str, ...], found: tuple[Command, ...]) -> str:
    function = f"_{prog.replace('-', '_')}"
    cases = []
    for command in found:
        lines = [f"    {command.name})"]
        with_choices = dict(command.flag_choices)
        for flag, options in command.flag_choices:
            offer = f'COMPREPLY=($(compgen -W {_words(options)} -- "$cur"))'
            lines.append(f'      [[ "$prev" == {flag} ]] && {{ {offer}; return; }}')
        valued = "|".join(v for v in command.valued if v not in _TAKES_VALUE_GLOBAL and v not in with_choices)
        if valued:
            lines.append(f'      case "$prev" in {valued}) return ;; esac')
        lines.append(f'      if [[ "$cur" == -* ]]; then words_={_words(command.flags)}')
        if command.takes_name:
            lines.append(f'      elif [[ $npos == 0 ]]; then words_="$({_NAMES} $conn 2>/dev/null)"')
        elif command.choices:
            lines.append(f"      elif [[ $npos == 0 ]]; then words_={_words(command.choices)}")
        lines.append("      fi ;;")
        cases.append("\n".join(lines))
    names = _words([c.name for c in found])
    return f"""# {prog} completion for bash (source <({prog} completion bash))
{function}() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  local cmd="" conn="" npos=0 words_="" i word
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${{COMP_WORDS[i]}}"
    case "$word" in
      -n|--namespace|--kubeconfig|--context)
        ((i + 1 < COMP_CWORD)) && conn="$conn $word ${{COMP_WORDS[i+1]}}"; ((i++)) ;;
      -*) ;;
      *) if [[ -z "$cmd" ]]; then cmd="$word"; else ((npos++)); fi ;;
    esac
  done
  case "$prev" in
    --kubeconfig) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -n|--namespace) COMPREPLY=($(compgen -W "$({_NAMESPACES} $conn 2>/dev/null)" -- "$cur")); return ;;
    --context) COMPREPLY=($(compgen -W "$({_CONTEXTS} $conn 2>/dev/null)" -- "$cur")); return ;;
  esac
  case "$cmd" in
    "") if [[ "$cur" == -* ]]; then words_={_words(top_flags)}; else words_={names}; fi ;;
{chr(10).join(cases)}
  esac
  COMPREPLY=($(compgen -W "$words_" -- "$cur"))
}}
complete -F {function} {prog}
"""


def _fish(prog: str, top_flags: tuple[str, ...], found: tuple[Command, ...]) -> str:
    lines = [
        f"# {prog} completion for fish ({prog} completion fish | source)",
        f"complete -c {prog} -f",
        # The service names, in the namespace, context and kubeconfig already typed.
        f"function __{prog.replace('-', '_')}_names",
        "    set -l words (commandline -opc)",
        "    set -l conn",
        "    for i in (seq (count $words))",
        "        if contains -- $words[$i] -n --namespace --context --kubeconfig"
        "; and test $i -lt (count $words)",
        "            set -a conn $words[$i] $words[(math $i + 1)]",
        "        end",
        "    end",
        f"    {_NAMES} $conn 2>/dev/null | string split ' '",
        "end",
        # The namespaces and contexts after -n and --context (the connection already typed).
        f"function __{prog.replace('-', '_')}_conn_names",
        "    set -l words (commandline -opc)",
        "    set -l conn",
        "    for i in (seq (count $words))",
        "        if contains -- $words[$i] --context --kubeconfig; and test $i -lt (count $words)",
        "            set -a conn $words[$i] $words[(math $i + 1)]",
        "        end",
        "    end",
        "    llmkube completion $argv[1] $conn 2>/dev/null | string split ' '",
        "end",
    ]
    for command in found:
        described = f" -d {_fish_quote(command.help)}" if command.help else ""
        lines.append(f"complete -c {prog} -n __fish_use_subcommand -a {command.name}{described}")
    for flag in top_flags:
        lines.append(f"complete -c {prog} -n __fish_use_subcommand {_fish_flag(flag)}")
    for command in found:
        seen = f"'__fish_seen_subcommand_from {command.name}'"
        with_choices = dict(command.flag_choices)
        for flag in command.flags:
            value = " -r" if flag in command.valued else ""
            if flag in with_choices:
                value += f" -a {_fish_quote(' '.join(with_choices[flag]))}"
            lines.append(f"complete -c {prog} -n {seen} {_fish_flag(flag)}{value}")
        if command.takes_name:
            lines.append(f"complete -c {prog} -n {seen} -a '(__{prog.replace('-', '_')}_names)'")
        elif command.choices:
            lines.append(f"complete -c {prog} -n {seen} -a {_fish_quote(' '.join(command.choices))}")
    lines.append(f"complete -c {prog} -l kubeconfig -r -F")
    conn_names = f"__{prog.replace('-', '_')}_conn_names"
    lines.append(f"complete -c {prog} -s n -l namespace -r -a '({conn_names} namespaces)'")
    lines.append(f"complete -c {prog} -l context -r -a '({conn_names} contexts)'")
    return "\n".join(lines) + "\n"


def _fish_quote(text: str) -> str:
    """fish's single quotes: only backslash and the quote itself are escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_flag(flag: str) -> str:
    return f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
