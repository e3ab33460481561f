"""Everything the controller process is configured with (the CLI fills it from flags and env)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from llmkube.api.constants import EVENT_REPORTER, FIELD_MANAGER
from llmkube.kube.leader import LeaderElectionTiming

__all__ = ["DEFAULT_LEASE_NAME", "ManagerConfig", "parse_bind_address"]

DEFAULT_LEASE_NAME = "882d6afe.llmkube.dev"
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _default_lease_namespace() -> str:
    if namespace := os.environ.get("POD_NAMESPACE"):
        return namespace
    if _SERVICE_ACCOUNT_NAMESPACE.is_file():
        return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return "default"


@dataclass
class ManagerConfig:
    #: kubeconfig file; None: in-cluster service account, else $KUBECONFIG / ~/.kube/config
    kubeconfig: Path | str | None = None
    context: str | None = None
    #: watch this namespace only; None or "" watches all namespaces
    namespace: str | None = None
    #: default number of workers per controller (a controller may ask for its own)
    workers: int = 1
    leader_election: bool = False
    lease_namespace: str = field(default_factory=_default_lease_namespace)
    lease_name: str = DEFAULT_LEASE_NAME
    leader_timing: LeaderElectionTiming = field(default_factory=LeaderElectionTiming)
    #: "host:port", ":port" (all interfaces) or "0" (disabled), like controller-runtime
    metrics_bind_address: str = ":8080"
    health_bind_address: str = ":8081"
    log_level: str = "info"
    #: "json", "console" or "auto" (console on a TTY, JSON lines otherwise)
    log_format: str = "auto"
    #: set False when the caller configures structlog itself (tests, embedding)
    configure_logging: bool = True
    graceful_shutdown_timeout: float = 30.0
    cache_sync_timeout: float = 120.0
    #: /readyz fails once any watch has been failing continuously for this long
    watch_failure_tolerance: float = 120.0
    #: a watch that delivers nothing for this long (the API server sends a bookmark about every
    #: minute) is taken for dead and reopened: a silently stalled connection is noticed by then
    watch_read_timeout: float = 90.0
    field_manager: str = FIELD_MANAGER
    #: the `reportingController` of every Event (what `kubectl describe` shows under From)
    event_reporter: str = EVENT_REPORTER
    #: install SIGTERM/SIGINT handlers (only possible in the main thread)
    handle_signals: bool = True

    @property
    def watch_namespace(self) -> str | None:
        return self.namespace or None


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """``":8080"`` -> ("0.0.0.0", 8080); ``"127.0.0.1:0"`` -> an ephemeral port; ``"0"`` -> None."""
    address = address.strip()
    if address in ("", "0"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"bind address {address!r} must be host:port, :port or 0")
    return (host.strip("[]") or "0.0.0.0", int(port))
