"""Everything the host agent is configured with, checked at start: a value no host could use stops
it with a message naming the flag (`AgentConfigError`), before it connects to anything."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from llmkube.agent import host
from llmkube.apimachinery.quantity import QuantityError, parse_quantity
from llmkube.plan.agent import supervision
from llmkube.plan.agent.download import DownloadLimits
from llmkube.plan.agent.memory import PressureSettings, describe_bytes, parse_budget
from llmkube.plan.agent.rollout import DrainSettings
from llmkube.plan.model.egress import EgressConfig
from llmkube.plan.model.local_roots import InvalidLocalRoot, normalized_roots
from llmkube.plan.model.remote import DEFAULT_HF_ENDPOINT

#: where Homebrew puts llama.cpp (Apple Silicon, then Intel), searched after PATH
HOMEBREW_LLAMA_SERVER = ("/opt/homebrew/bin/llama-server", "/usr/local/bin/llama-server")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class AgentConfigError(ValueError):
    pass


@dataclass(frozen=True)
class AgentConfig:
    name: str
    address: str
    metal: bool
    llama_server: str
    namespace: str | None
    service_selector: str
    cache_dir: Path
    state_dir: Path
    local_roots: tuple[str, ...]
    egress: EgressConfig
    total_memory: int
    budget: int
    ports: range | None
    heartbeat_interval: float = 30.0
    supervision: supervision.Settings = field(default_factory=supervision.Settings)
    drain: DrainSettings = field(default_factory=DrainSettings)
    pressure: PressureSettings = field(default_factory=PressureSettings)
    pressure_interval: float = 10.0
    stop_on_exit: bool = False
    #: namespaces whose services may pass any llama-server flag but the agent's own
    unrestricted_server_flags: frozenset[str] = frozenset()
    #: the controller's own namespace: the master of the server keys, the list of the Services
    #: the agent may write EndpointSlices for
    controller_namespace: str = "llmkube-system"
    downloads: DownloadLimits = field(default_factory=DownloadLimits)
    hf_endpoint: str = DEFAULT_HF_ENDPOINT

    def describe(self) -> dict[str, object]:
        """What the start-up log line says."""
        return {
            "agent": self.name,
            "advertise_address": self.address,
            "metal": self.metal,
            "llama_server": self.llama_server,
            "namespace": self.namespace or "all",
            "service_selector": self.service_selector or "none",
            "memory_budget": describe_bytes(self.budget),
            "host_memory": describe_bytes(self.total_memory),
            "model_cache": str(self.cache_dir),
            "state": str(self.state_dir),
            "model_local_roots": list(self.local_roots),
            "unrestricted_server_flags": sorted(self.unrestricted_server_flags),
            "max_model_bytes": self.downloads.max_file_bytes,
            "download_min_speed": self.downloads.min_speed,
            "download_min_speed_time": self.downloads.min_speed_time,
            "hf_endpoint": self.hf_endpoint,
        }


def agent_name(value: str) -> str:
    """`--name`: a DNS label (it is part of each EndpointSlice's name and a label value)."""
    name = value.strip().lower()
    if not _DNS_LABEL.match(name) or len(name) > 63:
        raise AgentConfigError(
            f"--name: {value!r} is not a DNS label (lowercase letters, digits and '-', at most 63)"
        )
    return name


def namespace_name(flag: str, value: str) -> str:
    """A namespace's name (a DNS label)."""
    name = value.strip()
    if not _DNS_LABEL.match(name) or len(name) > 63:
        raise AgentConfigError(f"{flag}: {value!r} is not a namespace name (a DNS label)")
    return name


def default_name() -> str:
    """This host's name, made a DNS label (`Mac-Studio.local` -> `mac-studio`)."""
    first = host.host_name().split(".")[0].lower()
    cleaned = re.sub(r"[^a-z0-9-]+", "-", first).strip("-")[:63].strip("-")
    return cleaned or "agent"


def find_llama_server(flag: str) -> str:
    """`--llama-server`, else `llama-server` on PATH, else Homebrew's; an executable file."""
    if flag:
        path = shutil.which(flag) if os.sep not in flag else flag
        if path is None or not os.access(path, os.X_OK) or not os.path.isfile(path):
            raise AgentConfigError(f"--llama-server: {flag} is not an executable file")
        return os.path.abspath(path)
    found = shutil.which("llama-server") or next(
        (p for p in HOMEBREW_LLAMA_SERVER if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise AgentConfigError(
            "llama-server is not on PATH (nor in Homebrew's bin): install llama.cpp (brew install "
            "llama.cpp, or build it) or give its path with --llama-server"
        )
    return os.path.abspath(found)


def server_ports(value: str) -> range | None:
    """`--server-ports`: empty for any free port, or `FIRST-LAST`."""
    text = value.strip()
    if not text:
        return None
    first, sep, last = text.partition("-")
    if not sep or not first.isdigit() or not last.isdigit() or not 0 < int(first) <= int(last) < 65536:
        raise AgentConfigError(f"--server-ports: {value!r} is not a port range FIRST-LAST (e.g. 30000-30099)")
    return range(int(first), int(last) + 1)


def checked_address(value: str) -> str:
    if not value:
        raise AgentConfigError(
            "--advertise-address is required: the address of this host that the cluster's nodes reach "
            "(the EndpointSlices send the Service's traffic there)"
        )
    try:
        return host.check_advertise_address(value)
    except ValueError as invalid:
        raise AgentConfigError(f"--advertise-address: {invalid}") from None


def budget(value: str, total: int) -> int:
    if total <= 0:
        raise AgentConfigError("the host's memory cannot be read: give --memory-budget as a quantity (24Gi)")
    try:
        return parse_budget(value, total) if value.strip() or total > 0 else 0
    except ValueError as invalid:
        raise AgentConfigError(f"--memory-budget: {invalid}") from None


def local_roots(value: str) -> tuple[str, ...]:
    try:
        return normalized_roots(value.split(","))
    except InvalidLocalRoot as invalid:
        raise AgentConfigError(str(invalid)) from None


def namespaces(flag: str, value: str) -> frozenset[str]:
    """A comma-separated list of namespace names (DNS labels)."""
    return frozenset(namespace_name(flag, part) for part in value.split(",") if part.strip())


def byte_count(flag: str, value: str, *, allow_zero: bool = False) -> int:
    """A flag that is a number of bytes, as a quantity (`256Gi`, `32Ki`, `1000000`)."""
    try:
        amount = parse_quantity(value.strip()).value
    except QuantityError as invalid:
        raise AgentConfigError(f"{flag}: {invalid}") from None
    if amount < 0 or (amount == 0 and not allow_zero) or amount.denominator != 1:
        raise AgentConfigError(f"{flag}: {value!r} is not a whole number of bytes above 0")
    return int(amount)


def download_limits(max_model_bytes: str, min_speed: str, min_speed_time: float) -> DownloadLimits:
    if min_speed_time <= 0:
        raise AgentConfigError(f"--download-min-speed-time: {min_speed_time} is not a positive number")
    return DownloadLimits(
        max_file_bytes=byte_count("--max-model-bytes", max_model_bytes),
        min_speed=byte_count("--download-min-speed", min_speed, allow_zero=True),
        min_speed_time=min_speed_time,
    )


def hf_endpoint(value: str) -> str:
    """`--hf-endpoint`: an http(s) URL (the files' URLs are built on it)."""
    text = value.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", text):
        raise AgentConfigError(f"--hf-endpoint: {value!r} is not an http(s) URL (https://huggingface.co)")
    return text
