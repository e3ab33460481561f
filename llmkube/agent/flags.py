"""`llmkube agent`'s command line: every flag, with its environment variable and default. Building
the parser imports nothing heavy (every `llmkube` start builds it)."""

import argparse
import os
from pathlib import Path

from llmkube.flags import (
    ProbeAddresses,
    add_kubeconfig_flag,
    add_logging_flags,
    add_probe_flags,
    add_source_egress_flags,
)

DEFAULT_METRICS_ADDRESS, DEFAULT_HEALTH_ADDRESS = "127.0.0.1:9090", "127.0.0.1:9091"


def _state_home() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/llmkube-agent")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "llmkube-agent"


def _cache_home() -> Path:
    if os.geteuid() == 0:
        return Path("/var/cache/llmkube-agent")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llmkube-agent"


def add_agent_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    add_kubeconfig_flag(parser)
    parser.add_argument(
        "--advertise-address",
        default=env("LLMKUBE_AGENT_ADVERTISE_ADDRESS", ""),
        help="this host's address that the cluster's nodes reach: the servers listen there and the "
        "EndpointSlices point there; checked at start (required) [LLMKUBE_AGENT_ADVERTISE_ADDRESS]",
    )
    parser.add_argument(
        "--name",
        default=env("LLMKUBE_AGENT_NAME", ""),
        help="this agent's name, unique in the cluster: in its EndpointSlices' names and labels "
        "(default: the host name) [LLMKUBE_AGENT_NAME]",
    )
    parser.add_argument(
        "--namespace",
        default=env("LLMKUBE_AGENT_NAMESPACE", ""),
        help="serve the metal services of one namespace only (default: all) [LLMKUBE_AGENT_NAMESPACE]",
    )
    parser.add_argument(
        "--controller-namespace",
        default=env("LLMKUBE_AGENT_CONTROLLER_NAMESPACE", "llmkube-system"),
        help="the llmkube controller's namespace: its ConfigMap llmkube-metal-services lists the "
        "Services this agent may register endpoints for (an admission policy refuses the others), "
        "and it waits for a Service to be listed; its Secret llmkube-metal-server-key is the master "
        "of the servers' keys (default: llmkube-system) [LLMKUBE_AGENT_CONTROLLER_NAMESPACE]",
    )
    parser.add_argument(
        "--service-selector",
        default=env("LLMKUBE_AGENT_SERVICE_SELECTOR", ""),
        metavar="SELECTOR",
        help="serve only the InferenceServices with these labels, a label selector such as "
        "inference.llmkube.dev/host=mac-studio (default: every metal service in scope): how several "
        "agents share a cluster [LLMKUBE_AGENT_SERVICE_SELECTOR]",
    )
    parser.add_argument(
        "--llama-server",
        default=env("LLMKUBE_AGENT_LLAMA_SERVER", ""),
        help="the llama-server binary (default: llama-server on PATH, else Homebrew's) "
        "[LLMKUBE_AGENT_LLAMA_SERVER]",
    )
    parser.add_argument(
        "--model-cache-dir",
        type=Path,
        default=Path(env("LLMKUBE_AGENT_MODEL_CACHE", str(_cache_home() / "models"))),
        help="where http(s) and Hugging Face models are downloaded (default: "
        "~/.cache/llmkube-agent/models; as root /var/cache/llmkube-agent/models) [LLMKUBE_AGENT_MODEL_CACHE]",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(env("LLMKUBE_AGENT_STATE_DIR", str(_state_home()))),
        help="the servers it started (a restarted agent adopts them) and their logs (default: "
        "~/.local/state/llmkube-agent; as root /var/lib/llmkube-agent) [LLMKUBE_AGENT_STATE_DIR]",
    )
    parser.add_argument(
        "--model-local-roots",
        default=env("LLMKUBE_MODEL_LOCAL_ROOTS", ""),
        metavar="DIR[,DIR...]",
        help="the only directories local-path Models may be served from, symbolic links leading out "
        "of them refused; empty (the default) refuses every local source [LLMKUBE_MODEL_LOCAL_ROOTS]",
    )
    parser.add_argument(
        "--unrestricted-server-flags",
        default=env("LLMKUBE_AGENT_UNRESTRICTED_SERVER_FLAGS", ""),
        metavar="NAMESPACE[,NAMESPACE...]",
        help="namespaces whose services may pass llama-server any flag in extraArgs but the agent's "
        "own (its address, port, key, model, and what the spec's fields set); elsewhere only the "
        "flags docs/agent.md lists as harmless on a host pass (default: none) "
        "[LLMKUBE_AGENT_UNRESTRICTED_SERVER_FLAGS]",
    )
    add_source_egress_flags(parser, "the agent")
    parser.add_argument(
        "--hf-endpoint",
        default=env("HF_ENDPOINT", "https://huggingface.co"),
        help="the Hugging Face Hub (or a mirror of it) that hf:// Models' files are downloaded from, "
        "as the controller's --hf-endpoint [HF_ENDPOINT]",
    )
    parser.add_argument(
        "--max-model-bytes",
        default=env("LLMKUBE_AGENT_MAX_MODEL_BYTES", "256Gi"),
        metavar="QUANTITY",
        help="the largest model file the agent downloads (default 256Gi); never more than the room on "
        "the cache's disk, less 64 MiB kept free [LLMKUBE_AGENT_MAX_MODEL_BYTES]",
    )
    parser.add_argument(
        "--download-min-speed",
        default=env("LLMKUBE_AGENT_DOWNLOAD_MIN_SPEED", "32Ki"),
        metavar="QUANTITY",
        help="bytes a second a download must keep up, over every --download-min-speed-time seconds, "
        "or it is cut (as curl's --speed-limit; default 32Ki, 0 for no floor) "
        "[LLMKUBE_AGENT_DOWNLOAD_MIN_SPEED]",
    )
    parser.add_argument(
        "--download-min-speed-time",
        type=float,
        default=float(env("LLMKUBE_AGENT_DOWNLOAD_MIN_SPEED_TIME", "120")),
        metavar="SECONDS",
        help="the stretch --download-min-speed is measured over (as curl's --speed-time; default 120) "
        "[LLMKUBE_AGENT_DOWNLOAD_MIN_SPEED_TIME]",
    )
    parser.add_argument(
        "--memory-budget",
        default=env("LLMKUBE_AGENT_MEMORY_BUDGET", ""),
        help="the memory the servers may take: a quantity (24Gi) or a fraction of the host's (0.6, "
        "60%%); default 0.67 of a host up to 36 GiB, 0.75 of a larger one [LLMKUBE_AGENT_MEMORY_BUDGET]",
    )
    parser.add_argument(
        "--server-ports",
        default=env("LLMKUBE_AGENT_SERVER_PORTS", ""),
        metavar="FIRST-LAST",
        help="the ports the servers may listen on (default: any free port) [LLMKUBE_AGENT_SERVER_PORTS]",
    )
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        default=float(env("LLMKUBE_AGENT_HEARTBEAT_INTERVAL", "30")),
        help="seconds between heartbeats on each EndpointSlice (default 30; the controller takes a "
        "host for offline after --metal-heartbeat-timeout, 180 s by default)",
    )
    parser.add_argument(
        "--startup-timeout",
        type=float,
        default=300.0,
        help="seconds a new server has to answer /health before it is restarted (default 300)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        help="seconds a replaced server may finish its requests before it is stopped (default 30)",
    )
    parser.add_argument(
        "--memory-pressure-interval",
        type=float,
        default=10.0,
        help="seconds between checks of the host's free memory; 0 disables eviction under pressure "
        "(default 10)",
    )
    parser.add_argument(
        "--memory-pressure-critical",
        type=float,
        default=0.10,
        help="free memory below this fraction of the host's is critical: one service is evicted at a time "
        "(default 0.10)",
    )
    parser.add_argument(
        "--stop-on-exit",
        action=argparse.BooleanOptionalAction,
        default=env("LLMKUBE_AGENT_STOP_ON_EXIT") == "true",
        help="stop every server and remove its endpoints when the agent stops (default: leave them "
        "serving; the next agent adopts them) [LLMKUBE_AGENT_STOP_ON_EXIT]",
    )
    add_probe_flags(
        parser,
        ProbeAddresses(
            DEFAULT_METRICS_ADDRESS,
            DEFAULT_HEALTH_ADDRESS,
            metrics_env="LLMKUBE_AGENT_METRICS_BIND_ADDRESS",
            health_env="LLMKUBE_AGENT_HEALTH_BIND_ADDRESS",
        ),
    )
    add_logging_flags(parser)
