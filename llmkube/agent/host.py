"""What the agent asks of the host it runs on: memory, processes, addresses, ports. Linux reads
/proc; macOS asks `sysctl` and `ps` (no library that would have to be installed on the host)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Collection

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def is_macos() -> bool:
    return sys.platform == "darwin"


def is_metal_host() -> bool:
    """Apple Silicon: llama.cpp's Metal backend is the GPU, and shares the host's memory."""
    return is_macos() and platform.machine() == "arm64"


def _sysctl(name: str) -> str | None:
    try:
        result = subprocess.run(
            ["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo's fields, in bytes."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[name.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return fields


def _linux_meminfo() -> dict[str, int]:
    with open("/proc/meminfo") as file:
        return meminfo(file.read())


def total_memory() -> int:
    if is_macos():
        value = _sysctl("hw.memsize")
        return int(value) if value and value.isdigit() else 0
    return _linux_meminfo().get("MemTotal", 0)


def available_memory(total: int) -> int | None:
    """Memory the host can still give without swapping hard (None: unknown). Linux: MemAvailable;
    macOS: the kernel's memorystatus level (the percentage of memory free)."""
    if is_macos():
        level = _sysctl("kern.memorystatus_level")
        return total * int(level) // 100 if level and level.isdigit() else None
    return _linux_meminfo().get("MemAvailable")


def process_rss(pid: int) -> int | None:
    if is_macos():
        try:
            out = subprocess.run(
                ["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True, timeout=5, check=False
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return None
        return int(out) * 1024 if out.isdigit() else None
    try:
        with open(f"/proc/{pid}/statm") as file:
            return int(file.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def process_fingerprint(pid: int) -> str | None:
    """What tells this process from a later one with the same pid: its start time and command
    line (None when no such process runs). Linux: /proc/<pid>/stat's start time in clock ticks
    since boot and the boot's id; macOS: ps's start time."""
    if pid <= 0:
        return None
    if is_macos():
        try:
            result = subprocess.run(
                ["ps", "-o", "lstart=,command=", "-p", str(pid)],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        out = result.stdout.strip()
        return out or None
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            cmdline = file.read()
        with open("/proc/sys/kernel/random/boot_id") as file:
            boot = file.read().strip()
    except OSError:
        return None
    # Fields after the command (which may hold spaces and parentheses): state is the 3rd field,
    # starttime the 22nd.
    after = stat[stat.rfind(b")") + 2 :].split()
    if len(after) < 20 or after[0] in (b"Z", b"X"):  # a zombie is gone in all but name
        return None
    command = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return f"{boot}:{after[19].decode()}:{command}"


def check_advertise_address(address: str) -> str:
    """The address the cluster reaches this host's servers on: an IP address of one of its own
    interfaces, not loopback or link-local (no other host reaches those). Returns it normalized;
    raises ValueError saying what is wrong."""
    try:
        parsed = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        raise ValueError(f"{address!r} is not an IP address") from None
    if parsed.is_loopback or parsed.is_unspecified:
        raise ValueError(
            f"{parsed} is {'a loopback' if parsed.is_loopback else 'the unspecified'} address: the "
            "cluster cannot reach this host there; give an address of this host that the cluster's "
            "nodes reach"
        )
    if parsed.is_link_local or parsed.is_multicast:
        raise ValueError(f"{parsed} is a {'link-local' if parsed.is_link_local else 'multicast'} address")
    family = socket.AF_INET6 if parsed.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(parsed), 0))
        except OSError as error:
            raise ValueError(
                f"{parsed} is not an address of this host (binding to it failed: {error.strerror})"
            ) from None
    return str(parsed)


def free_port(address: str, ports: range | None, in_use: Collection[int]) -> int | None:
    """A port on `address` nothing listens on: any (the kernel's pick) or the first free one of
    `ports`, skipping `in_use` (the agent's own servers). None when the range has none."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    candidates = [0] if ports is None else [p for p in ports if p not in in_use]
    for candidate in candidates:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((address, candidate))
            except OSError:
                continue
            port = int(probe.getsockname()[1])
            if port not in in_use:
                return port
    return None


def host_name() -> str:
    return socket.gethostname()


def free_bytes(directory: str) -> int | None:
    with contextlib.suppress(OSError):
        stat = os.statvfs(directory)
        return stat.f_bavail * stat.f_frsize
    return None
