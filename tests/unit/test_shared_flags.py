"""The flags `controller`, `router` and `agent` share (llmkube/flags.py): each process has them under
one name, reads the same environment variable and says the same thing in its help, so that a value
set once for a cluster means the same to every process."""

import argparse
from collections.abc import Callable

import pytest

from llmkube.agent.flags import add_agent_flags
from llmkube.process.flags import add_controller_flags
from llmkube.router.flags import add_router_flags

PROCESSES: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "controller": add_controller_flags,
    "router": add_router_flags,
    "agent": add_agent_flags,
}


def parser_of(process: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    PROCESSES[process](parser)
    return parser


def action(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


# flag -> (the processes that have it, its environment variable and a value to set, the parsed name)
SHARED = [
    ("--kubeconfig", ["controller", "router", "agent"], None, "kubeconfig"),
    ("--log-level", ["controller", "router", "agent"], ("LLMKUBE_LOG_LEVEL", "debug"), "log_level"),
    ("--log-format", ["controller", "router", "agent"], ("LLMKUBE_LOG_FORMAT", "json"), "log_format"),
    (
        "--model-source-allowed-hosts",
        ["controller", "agent"],
        ("LLMKUBE_MODEL_SOURCE_ALLOWED_HOSTS", "models.internal"),
        "model_source_allowed_hosts",
    ),
    ("--service-cidr", ["controller", "agent"], ("LLMKUBE_SERVICE_CIDR", "10.96.0.0/12"), "service_cidr"),
    ("--pod-cidr", ["controller", "agent"], ("LLMKUBE_POD_CIDR", "10.244.0.0/16"), "pod_cidr"),
]


@pytest.mark.parametrize(("flag", "processes", "variable", "dest"), SHARED)
def test_a_shared_flag_reads_one_variable_in_every_process(
    flag: str,
    processes: list[str],
    variable: tuple[str, str] | None,
    dest: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if variable is not None:
        monkeypatch.setenv(*variable)
    for process in processes:
        parsed = parser_of(process).parse_args([])
        assert getattr(parsed, dest) == (variable[1] if variable else None), process


@pytest.mark.parametrize(("flag", "processes", "variable", "dest"), SHARED)
def test_a_shared_flag_says_the_same_in_every_process(
    flag: str, processes: list[str], variable: tuple[str, str] | None, dest: str
) -> None:
    helps = {process: action(parser_of(process), flag).help or "" for process in processes}
    # Only the name of the process that fetches may differ.
    normalised = {h.replace("the controller", "P").replace("the agent", "P") for h in helps.values()}
    assert len(normalised) == 1, helps
    if variable is not None:
        assert all(f"[{variable[0]}]" in h for h in helps.values()), helps


@pytest.mark.parametrize(
    ("process", "metrics_variable", "health_variable", "metrics_default"),
    [
        ("controller", "LLMKUBE_METRICS_BIND_ADDRESS", "LLMKUBE_HEALTH_BIND_ADDRESS", ":8080"),
        # The agent shares its host with other programs: loopback, and variables of its own.
        (
            "agent",
            "LLMKUBE_AGENT_METRICS_BIND_ADDRESS",
            "LLMKUBE_AGENT_HEALTH_BIND_ADDRESS",
            "127.0.0.1:9090",
        ),
    ],
)
def test_probe_addresses_are_controller_runtimes_flags_with_each_process_defaults(
    process: str,
    metrics_variable: str,
    health_variable: str,
    metrics_default: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(metrics_variable, raising=False)
    assert parser_of(process).parse_args([]).metrics_bind_address == metrics_default
    monkeypatch.setenv(metrics_variable, "127.0.0.1:0")
    monkeypatch.setenv(health_variable, "0")
    parsed = parser_of(process).parse_args([])
    assert (parsed.metrics_bind_address, parsed.health_probe_bind_address) == ("127.0.0.1:0", "0")
