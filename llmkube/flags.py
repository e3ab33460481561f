"""The flags every llmkube process shares (`controller`, `router`, `agent`): one name, one environment
variable and one meaning each, so that a platform engineer learns them once. What a process adds is
in its own flags module. Building a parser imports nothing heavy: every `llmkube` start builds one."""

import argparse
import os
from dataclasses import dataclass


def add_kubeconfig_flag(parser: argparse.ArgumentParser) -> None:
    # The order llmkube.kube.rest.config.load_client_config follows.
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig path (default: in a pod its ServiceAccount, else $KUBECONFIG, ~/.kube/config)",
    )


def add_logging_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--log-level",
        default=env("LLMKUBE_LOG_LEVEL", "info"),
        help="debug, info, warning or error (default info) [LLMKUBE_LOG_LEVEL]",
    )
    parser.add_argument(
        "--log-format",
        choices=["json", "console", "auto"],
        default=env("LLMKUBE_LOG_FORMAT", "auto"),
        help="JSON lines, console, or auto: console on a terminal, else JSON [LLMKUBE_LOG_FORMAT]",
    )


@dataclass(frozen=True)
class ProbeAddresses:
    """A process's default addresses of /metrics and of /healthz and /readyz, and the environment
    variables that override them (the agent's differ: it shares a host with other programs)."""

    metrics: str
    health: str
    metrics_env: str = "LLMKUBE_METRICS_BIND_ADDRESS"
    health_env: str = "LLMKUBE_HEALTH_BIND_ADDRESS"


def add_probe_flags(parser: argparse.ArgumentParser, addresses: ProbeAddresses) -> None:
    """controller-runtime's flag names for the metrics and health endpoints."""
    env = os.environ.get
    parser.add_argument(
        "--metrics-bind-address",
        default=env(addresses.metrics_env, addresses.metrics),
        help=f"address of /metrics, host:port (default {addresses.metrics}; :0 picks a free port; "
        f"0 disables) [{addresses.metrics_env}]",
    )
    parser.add_argument(
        "--health-probe-bind-address",
        default=env(addresses.health_env, addresses.health),
        help=f"address of /healthz and /readyz, host:port (default {addresses.health}; :0 picks a "
        f"free port; 0 disables) [{addresses.health_env}]",
    )


def add_source_egress_flags(parser: argparse.ArgumentParser, fetcher: str) -> None:
    """Where a process that fetches Models' http(s) sources refuses to connect, and its exceptions.

    `fetcher` names the process in the help ("the controller", "the agent"): both refuse the same
    networks and read the same environment variables, so one cluster's settings serve both.
    """
    env = os.environ.get
    parser.add_argument(
        "--model-source-allowed-hosts",
        default=env("LLMKUBE_MODEL_SOURCE_ALLOWED_HOSTS", ""),
        metavar="HOST[,HOST...]",
        help=f"hosts {fetcher} may fetch Models' http(s) sources from although they are in a "
        "network it refuses (loopback, link-local and metadata addresses, the cluster's Service and "
        "Pod networks): host, *.domain, host:port, an IP address, [IPv6]:port or a CIDR. The API "
        "server's own endpoint is never allowed [LLMKUBE_MODEL_SOURCE_ALLOWED_HOSTS]",
    )
    parser.add_argument(
        "--service-cidr",
        default=env("LLMKUBE_SERVICE_CIDR", ""),
        metavar="CIDR[,CIDR...]",
        help="the cluster's Service networks, refused as model sources (default: read from the "
        "cluster's ServiceCIDR objects) [LLMKUBE_SERVICE_CIDR]",
    )
    parser.add_argument(
        "--pod-cidr",
        default=env("LLMKUBE_POD_CIDR", ""),
        metavar="CIDR[,CIDR...]",
        help="the cluster's Pod networks, refused as model sources (default: the Nodes' "
        "spec.podCIDRs) [LLMKUBE_POD_CIDR]",
    )
