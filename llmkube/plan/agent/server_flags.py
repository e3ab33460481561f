"""Which of a spec's `extraArgs` a host agent passes to llama-server: the host is the sandbox.

In a pod, llama-server runs in a container the API server's admission and the kubelet confine, so
a flag can do no more than the pod may. On a host there is no container around it: every flag is a
capability of the host. `--path /` serves its files, `--host 0.0.0.0` listens on every network,
`--log-file` writes where it says, `-mu` fetches any URL past the egress rules, `--tools` hands the
model a shell. So on the agent's path `extraArgs` pass only through an allowlist of flags the agent
knows to do nothing of the kind:

* allowed: sampling defaults, chat-template and reasoning settings, batching and caching behaviour
  that does not change what memory the server takes, embeddings and reranking, logging verbosity,
  thread counts (ALLOWED below, each with the kind of value it takes);
* never, whatever the admin says: a flag the agent sets itself for this service (its model, address,
  port, key, metrics, and whatever the spec's own fields set), repeated or overridden;
* refused unless the admin opts a namespace in (`--unrestricted-server-flags`): every other flag,
  named with what it would do (REFUSED_BECAUSE: reads or serves a host file, writes one, fetches a
  URL, listens elsewhere, changes the memory the agent's estimate counts, ...);
* a word llama-server does not know is refused always (it would not start).

What a flag takes is read from the pinned llama-server itself (`llama_server_flags.py`, generated
from its --help and checked against it by a test), so a value can never be taken for a flag or a
flag for a value: llama.cpp's own parser takes the next word as the value of a flag that has one,
whatever it looks like, accepts `_` for `-` in long flags, and knows no `--flag=value` form.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llmkube.plan.agent.llama_server_flags import FLAGS, canonical

#: the longest value a text flag may have (a grammar or a JSON schema inline; a chat template)
MAX_TEXT = 64 * 1024
#: most flags take a short word or number
MAX_WORD = 256


class Value(enum.Enum):
    NONE = "none"  # a switch
    INT = "int"
    FLOAT = "float"
    WORD = "word"  # a short token: a name, a list of names, an on/off/auto
    TEXT = "text"  # free text up to MAX_TEXT (a grammar, a schema, a template)


#: the flags an agent passes from extraArgs, by their canonical spelling (the first long form: a
#: switch's negative spellings, `--no-warmup` for `--warmup`, are the same option)
ALLOWED: dict[str, Value] = {
    # sampling defaults (a request may set its own)
    "--temp": Value.FLOAT,
    "--top-k": Value.INT,
    "--top-p": Value.FLOAT,
    "--min-p": Value.FLOAT,
    "--top-nsigma": Value.FLOAT,
    "--xtc-probability": Value.FLOAT,
    "--xtc-threshold": Value.FLOAT,
    "--typical": Value.FLOAT,
    "--repeat-last-n": Value.INT,
    "--repeat-penalty": Value.FLOAT,
    "--presence-penalty": Value.FLOAT,
    "--frequency-penalty": Value.FLOAT,
    "--dry-multiplier": Value.FLOAT,
    "--dry-base": Value.FLOAT,
    "--dry-allowed-length": Value.INT,
    "--dry-penalty-last-n": Value.INT,
    "--dry-sequence-breaker": Value.WORD,
    "--adaptive-target": Value.FLOAT,
    "--adaptive-decay": Value.FLOAT,
    "--dynatemp-range": Value.FLOAT,
    "--dynatemp-exp": Value.FLOAT,
    "--mirostat": Value.INT,
    "--mirostat-lr": Value.FLOAT,
    "--mirostat-ent": Value.FLOAT,
    "--samplers": Value.WORD,
    "--sampler-seq": Value.WORD,
    "--seed": Value.INT,
    "--ignore-eos": Value.NONE,
    "--logit-bias": Value.WORD,
    "--grammar": Value.TEXT,
    "--json-schema": Value.TEXT,
    "--predict": Value.INT,
    # chat templates and reasoning
    "--jinja": Value.NONE,
    "--chat-template": Value.TEXT,  # a built-in template's name, or the template itself
    "--chat-template-kwargs": Value.TEXT,
    "--reasoning-format": Value.WORD,
    "--reasoning": Value.WORD,
    "--reasoning-effort": Value.WORD,
    "--reasoning-budget": Value.INT,
    "--reasoning-budget-message": Value.TEXT,
    "--reasoning-preserve": Value.NONE,
    "--skip-chat-parsing": Value.NONE,
    "--prefill-assistant": Value.NONE,
    "--special": Value.NONE,
    "--spm-infill": Value.NONE,
    "--alias": Value.WORD,
    "--tags": Value.WORD,
    "--escape": Value.NONE,
    "--reverse-prompt": Value.TEXT,
    # serving behaviour that takes no memory the estimate does not count
    "--cont-batching": Value.NONE,
    "--context-shift": Value.NONE,
    "--keep": Value.INT,
    "--cache-prompt": Value.NONE,
    "--cache-reuse": Value.INT,
    "--timeout": Value.INT,
    "--sse-ping-interval": Value.INT,
    "--threads-http": Value.INT,
    "--slot-prompt-similarity": Value.FLOAT,
    "--perf": Value.NONE,
    "--warmup": Value.NONE,
    "--ui": Value.NONE,
    "--embedding": Value.NONE,
    "--rerank": Value.NONE,
    "--pooling": Value.WORD,
    "--embd-normalize": Value.INT,
    "--sleep-idle-seconds": Value.INT,
    # rope: arithmetic on positions, no memory of its own
    "--rope-scaling": Value.WORD,
    "--rope-scale": Value.FLOAT,
    "--rope-freq-base": Value.FLOAT,
    "--rope-freq-scale": Value.FLOAT,
    "--yarn-orig-ctx": Value.INT,
    "--yarn-ext-factor": Value.FLOAT,
    "--yarn-attn-factor": Value.FLOAT,
    "--yarn-beta-slow": Value.FLOAT,
    "--yarn-beta-fast": Value.FLOAT,
    # CPU threads (the host's cores are shared anyway; priorities and affinities are not allowed)
    "--threads": Value.INT,
    "--threads-batch": Value.INT,
    # the server's own log (written to the agent's log file, which it keeps bounded)
    "--verbose": Value.NONE,
    "--verbosity": Value.INT,
    "--log-disable": Value.NONE,
    "--log-colors": Value.WORD,
    "--log-prefix": Value.NONE,
    "--log-timestamps": Value.NONE,
}

#: negative spellings allowed where the option's positive one is not
ALLOWED_NEGATIONS = frozenset(
    {"--no-slots", "--no-ui-mcp-proxy", "--no-webui-mcp-proxy", "--no-agent", "-no-ag"}
)

# What the flags the admin must opt in for would do, for the message (by canonical spelling).
_READS = "reads a file of the host"
_WRITES = "writes a file on the host"
_FETCHES = "fetches from the network, past the agent's egress rules"
_LISTENS = "changes where and how the server listens, or who may call it"
_MEMORY = (
    "changes the memory the server takes, which the agent's memory budget counts from the spec's own "
    "fields (contextSize, parallelSlots, batchSize, cacheTypeK/V, the Model's hardware.gpu...): set it there"
)
_HOST = "changes how the host schedules the server (priority, CPU affinity, NUMA, devices)"
_ENDPOINTS = "turns on endpoints that change the server or show other clients' data"
_TOOLS = "gives the model tools that run on the host"
_EXITS = "makes the server print something and exit"
_PRESET = "a preset that sets other flags (a model from the Hub among them)"
REFUSED_BECAUSE: dict[str, str] = {
    **dict.fromkeys(
        (
            "--model",
            "--mmproj",
            "--spec-draft-model",
            "--lora",
            "--lora-scaled",
            "--control-vector",
            "--control-vector-scaled",
            "--chat-template-file",
            "--grammar-file",
            "--json-schema-file",
            "--lookup-cache-static",
            "--api-key-file",
            "--ssl-key-file",
            "--ssl-cert-file",
            "--ui-config-file",
            "--mcp-servers-config",
            "--models-dir",
            "--models-preset",
            "--media-path",
            "--path",
        ),
        _READS,
    ),
    "--path": "serves the host's files over HTTP",
    "--video-ffmpeg-dir": "runs a program of the host",
    **dict.fromkeys(
        ("--log-file", "--slot-save-path", "--log-prompts-dir", "--lookup-cache-dynamic"), _WRITES
    ),
    **dict.fromkeys(
        (
            "--model-url",
            "--mmproj-url",
            "--hf-repo",
            "--hf-file",
            "--hf-token",
            "--spec-draft-hf",
            "--docker-repo",
            "--rpc",
            "--mcp-servers-json",
        ),
        _FETCHES,
    ),
    **dict.fromkeys(
        (
            "--host",
            "--port",
            "--reuse-port",
            "--api-key",
            "--api-prefix",
            "--cors-origins",
            "--cors-methods",
            "--cors-headers",
            "--cors-credentials",
            "--ui-mcp-proxy",
            "--metrics",
        ),
        _LISTENS,
    ),
    **dict.fromkeys(("--props", "--slots"), _ENDPOINTS),
    **dict.fromkeys(("--tools", "--tools-runtime", "--agent"), _TOOLS),
    **dict.fromkeys(
        (
            "--ctx-size",
            "--parallel",
            "--batch-size",
            "--ubatch-size",
            "--cache-type-k",
            "--cache-type-v",
            "--kv-unified",
            "--kv-unified-per-slot",
            "--swa-full",
            "--ctx-checkpoints",
            "--checkpoint-min-step",
            "--cache-ram",
            "--cache-idle-slots",
            "--gpu-layers",
            "--split-mode",
            "--tensor-split",
            "--main-gpu",
            "--flash-attn",
            "--kv-offload",
            "--cpu-moe",
            "--n-cpu-moe",
            "--n-cpu-ffn",
            "--override-tensor",
            "--override-kv",
            "--fit",
            "--fit-target",
            "--fit-ctx",
            "--no-host",
            "--repack",
            "--op-offload",
            "--load-mode",
            "--lazy-mode",
            "--image-min-tokens",
            "--image-max-tokens",
            "--mtmd-batch-max-tokens",
            "--models-max",
        ),
        _MEMORY,
    ),
    **dict.fromkeys(
        (
            "--prio",
            "--prio-batch",
            "--poll",
            "--poll-batch",
            "--cpu-mask",
            "--cpu-range",
            "--cpu-strict",
            "--cpu-mask-batch",
            "--cpu-range-batch",
            "--cpu-strict-batch",
            "--numa",
            "--device",
            "--mmproj-device",
        ),
        _HOST,
    ),
    **dict.fromkeys(("--version", "--help", "--list-devices", "--cache-list", "--completion-bash"), _EXITS),
}


def why_refused(flag: str) -> str:
    """What a flag outside the allowlist would do, for the message."""
    if flag in REFUSED_BECAUSE:
        return REFUSED_BECAUSE[flag]
    if flag.endswith(("-default", "-spec")):
        return _PRESET
    if flag.startswith(("--spec-", "--draft")):
        return "speculative decoding, which needs a draft model: a file of the host or one from the network"
    return "it is not one this agent knows to be harmless on a host"


@dataclass(frozen=True)
class Refused:
    index: int  # of extraArgs
    flag: str  # as the spec writes it
    why: str

    def text(self) -> str:
        return (
            f'spec.extraArgs[{self.index}] "{self.flag}" is not passed to llama-server by the host '
            f"agent: {self.why}"
        )


def judge(
    extra_args: Sequence[str], *, set_by_agent: Iterable[str] = (), unrestricted: bool = False
) -> Refused | None:
    """The first of `extra_args` the agent will not pass, or None when it passes them all.

    `set_by_agent`: the flags of the command line the agent builds for this service without them;
    `unrestricted`: the admin allows this service's namespace every flag llama-server has, but
    still none of those."""
    own = {canonical(flag) or flag for flag in set_by_agent}
    index = 0
    while index < len(extra_args):
        word = extra_args[index]
        flag = canonical(word)
        if flag is None:
            if word.startswith("-") and "=" in word:
                why = "llama-server takes a flag's value as the next argument, not after '='"
            elif word.startswith("-"):
                why = "llama-server has no such flag"
            else:
                why = "a value without a flag before it"
            return Refused(index, word, why)
        if flag in own:
            return Refused(
                index, word, "the agent sets it for this service, and it cannot be repeated or overridden"
            )
        values = FLAGS[flag]
        taken = extra_args[index + 1 : index + 1 + values]
        if len(taken) < values:
            return Refused(index, word, f"it takes {values} value{'s' if values > 1 else ''}")
        kind = Value.NONE if _normal(word) in ALLOWED_NEGATIONS else ALLOWED.get(flag)
        if kind is None and not unrestricted:
            return Refused(index, word, why_refused(flag))
        if kind is not None and values and (problem := _value_problem(kind, taken[0])) is not None:
            return Refused(index, word, problem)
        index += 1 + values
    return None


def _normal(word: str) -> str:
    return word.replace("_", "-") if word.startswith("--") else word


def _value_problem(kind: Value, value: str) -> str | None:
    if "\x00" in value:
        return "its value holds a NUL character"
    if kind is Value.TEXT:
        return f"its value is longer than {MAX_TEXT} characters" if len(value) > MAX_TEXT else None
    if len(value) > MAX_WORD:
        return f"its value is longer than {MAX_WORD} characters"
    if kind is Value.INT:
        try:
            int(value)
        except ValueError:
            return f'its value "{value}" is not a whole number'
    elif kind is Value.FLOAT:
        try:
            number = float(value)
        except ValueError:
            return f'its value "{value}" is not a number'
        if not math.isfinite(number):
            return f'its value "{value}" is not a finite number'
    return None
