"""Which extraArgs a host agent passes to llama-server (plan/agent/server_flags.py): the flags that
turn a spec into a capability of the host are refused by name, whatever spelling or position."""

from typing import Any

import pytest

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.agent.assignment import Verdict, assignment
from llmkube.plan.agent.launch import Host, agent_flags
from llmkube.plan.agent.llama_server_flags import FLAGS, canonical
from llmkube.plan.agent.server_flags import (
    ALLOWED,
    ALLOWED_NEGATIONS,
    MAX_TEXT,
    REFUSED_BECAUSE,
    judge,
)

MAC = Host(address="192.168.1.20", metal=True)
LINUX = Host(address="10.88.0.1", metal=False)
AGENT_SETS = ("--model", "--host", "--port", "--api-key-file", "--metrics", "--ctx-size", "--jinja")


@pytest.mark.parametrize(
    ("args", "index", "flag", "why"),
    [
        # the issue's: serve the host's files, listen everywhere, read, write and fetch past the rules
        (["--path", "/"], 0, "--path", "serves the host's files over HTTP"),
        (["--host", "0.0.0.0"], 0, "--host", "the agent sets it"),
        (["-m", "/etc/shadow"], 0, "-m", "the agent sets it"),
        (["--chat-template-file", "/root/.bashrc"], 0, "--chat-template-file", "reads a file of the host"),
        (["--log-file", "/etc/cron.d/x"], 0, "--log-file", "writes a file on the host"),
        (["-mu", "http://169.254.169.254/"], 0, "-mu", "fetches from the network"),
        (["--tools", "all"], 0, "--tools", "tools that run on the host"),
        (["-hf", "evil/preset"], 0, "-hf", "fetches from the network"),
        (["--props"], 0, "--props", "endpoints"),
        (["--slots"], 0, "--slots", "endpoints"),
        (["--api-key", "k"], 0, "--api-key", "who may call it"),
        (["--port", "1"], 0, "--port", "the agent sets it"),
        (["--rpc", "10.0.0.1:50052"], 0, "--rpc", "fetches from the network"),
        (["--prio", "3"], 0, "--prio", "schedules"),
        (["--gpt-oss-20b-default"], 0, "--gpt-oss-20b-default", "a preset"),
        # memory the agent's budget does not see: through the spec's fields only
        (["--parallel", "64"], 0, "--parallel", "changes the memory"),
        (["-np", "64"], 0, "-np", "changes the memory"),
        (["--cache-ram", "99999"], 0, "--cache-ram", "changes the memory"),
        # spellings llama.cpp reads the same
        (["--chat_template_file", "/etc/passwd"], 0, "--chat_template_file", "reads a file of the host"),
        (["--HOST", "0.0.0.0"], 0, "--HOST", "no such flag"),
        (["--ctx-size=4096"], 0, "--ctx-size=4096", "not after '='"),
        (["--no-such-flag"], 0, "--no-such-flag", "no such flag"),
        (["0.0.0.0"], 0, "0.0.0.0", "a value without a flag"),
        # a value is taken as llama.cpp takes it: the word after a flag that has one
        (["--alias", "--host", "0.0.0.0"], 2, "0.0.0.0", "a value without a flag"),
        (["--temp", "0.2", "--path", "/"], 2, "--path", "serves the host's files"),
        (["--temp"], 0, "--temp", "takes 1 value"),
        (["--temp", "warm"], 0, "--temp", "not a number"),
        (["--temp", "inf"], 0, "--temp", "not a finite number"),
        (["--top-k", "4.5"], 0, "--top-k", "not a whole number"),
        (["--alias", "a\x00b"], 0, "--alias", "NUL"),
        (["--alias", "x" * 300], 0, "--alias", "longer than 256"),
        (["--grammar", "x" * (MAX_TEXT + 1)], 0, "--grammar", f"longer than {MAX_TEXT}"),
        # the agent's own, in any spelling, or negated
        (["-c", "512"], 0, "-c", "the agent sets it"),
        (["--no-jinja"], 0, "--no-jinja", "the agent sets it"),
    ],
)
def test_refused(args: list[str], index: int, flag: str, why: str) -> None:
    refused = judge(args, set_by_agent=AGENT_SETS)
    assert refused is not None
    assert (refused.index, refused.flag) == (index, flag)
    assert why in refused.why
    assert refused.text().startswith(f'spec.extraArgs[{index}] "{flag}" is not passed')


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--temp", "0.2", "--top-k", "40", "--min-p", "0.05"],
        ["-t", "4", "--threads-batch", "4", "--threads-http", "2"],
        ["--alias", "chat", "--no-slots", "--no-webui", "--no-warmup"],
        ["--reasoning-format", "deepseek", "--chat-template", "chatml"],
        ["--grammar", 'root ::= "yes" | "no"'],
        ["--embedding", "--pooling", "mean"],
        ["--rope-freq-base", "10000", "--yarn-ext-factor", "1.0"],
        ["--cont_batching", "--seed", "-1"],  # `_` for `-`: llama.cpp reads it as --cont-batching
        ["--alias", "--host"],  # the alias is the word "--host": harmless
    ],
)
def test_allowed(args: list[str]) -> None:
    assert judge(args, set_by_agent=AGENT_SETS) is None


def test_an_admin_opt_in_allows_other_flags_but_never_the_agents_own() -> None:
    assert judge(["--path", "/srv/ui", "--log-file", "/tmp/x"], unrestricted=True) is None
    for own in (["--host", "0.0.0.0"], ["--api-key-file", "/dev/null"], ["-m", "/x"], ["-c", "9"]):
        refused = judge(own, set_by_agent=AGENT_SETS, unrestricted=True)
        assert refused is not None and "the agent sets it" in refused.why
    refused = judge(["--no-such-flag"], unrestricted=True)
    assert refused is not None and "no such flag" in refused.why


def test_every_flag_named_is_a_flag_of_the_pinned_server() -> None:
    """A name in the tables that llama-server does not have would never match (a typo there would
    silently change nothing): each is a canonical spelling of the generated table."""
    for name in (*ALLOWED, *REFUSED_BECAUSE):
        assert name in FLAGS, name
    for name in ALLOWED_NEGATIONS:
        assert canonical(name) is not None, name


def test_every_allowed_flag_takes_the_values_its_kind_says() -> None:
    from llmkube.plan.agent.server_flags import Value

    for name, kind in ALLOWED.items():
        assert (FLAGS[name] == 0) == (kind is Value.NONE), name


def isvc(spec: dict[str, Any]) -> InferenceService:
    status = {
        "effectivePriority": 0,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
    }
    return InferenceService.model_validate(
        {
            "metadata": {"name": "chat", "namespace": "team-a", "generation": 1},
            "spec": {"modelRef": "m", **spec},
            "status": status,
        }
    )


MODEL = Model.model_validate(
    {
        "metadata": {"name": "m", "namespace": "team-a", "generation": 1},
        "spec": {"source": "https://host/m.gguf", "hardware": {"accelerator": "metal"}},
        "status": {"phase": "Ready", "observedGeneration": 1},
    }
)


def test_the_flags_the_spec_fields_set_are_the_agents() -> None:
    flags = agent_flags(isvc({"contextSize": 2048, "parallelSlots": 2, "jinja": True}), MODEL, LINUX)
    assert {"--model", "--host", "--port", "--ctx-size", "--parallel", "--jinja", "--metrics"} <= set(flags)


@pytest.mark.parametrize(
    ("extra", "namespaces", "verdict"),
    [
        (["--path", "/"], (), Verdict.UNSUPPORTED),
        (["--path", "/"], ("team-a",), Verdict.SERVE),
        (["--host", "0.0.0.0"], ("team-a",), Verdict.UNSUPPORTED),
        (["--ctx-size", "64"], (), Verdict.UNSUPPORTED),
        (["--temp", "0.1"], (), Verdict.SERVE),
    ],
)
def test_a_refused_flag_is_the_services_status(
    extra: list[str], namespaces: tuple[str, ...], verdict: Verdict
) -> None:
    decision = assignment(
        isvc({"contextSize": 2048, "extraArgs": extra}), MODEL, LINUX, unrestricted_namespaces=namespaces
    )
    assert decision.verdict is verdict
    if verdict is Verdict.UNSUPPORTED:
        assert decision.message.startswith('spec.extraArgs[0] "')
