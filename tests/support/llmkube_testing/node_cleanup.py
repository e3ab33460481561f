"""Undo everything a node tier left on the machine, whether it stopped cleanly or was killed.

A real node leaves more than processes: containerd's shims outlive containerd by design (and keep
the containers running), kubelet and containerd mount volumes, overlay root filesystems and pod
network namespaces, the CNI plugins cache results under /var/lib/cni, containerd keeps shim sockets
under /run/containerd/s, kubelet links container logs into /var/log/containers, creates cgroups,
and sets a few kernel sysctls at start-up. The tier records where all of that is (`Footprint`)
before it starts anything; `clean_up` removes exactly that and nothing else:

1. every process in the tier's cgroup (the tier puts all it starts there, and shims and pods
   inherit or are created below it), then stray shims of *our* containerd socket;
2. every mount below the tier's directory (volumes, root filesystems, pod network namespaces:
   containerd is told to keep those under its state directory);
3. the entries of our containers in the global CNI cache and shim-socket directories;
4. the cgroups, depth first; the sysctls kubelet changed, once no other node tier is running.

Footprints are registered in /run/llmkube-node/ while a tier runs. A killed test run is cleaned by
the janitor the tier starts (`python -m llmkube_testing.node_cleanup watch FILE`, which waits for its
parent's end of a pipe to close), and anything older by `sweep_stale` when the next tier starts.
"""

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

REGISTRY = Path(os.environ.get("LLMKUBE_NODE_REGISTRY", "/run/llmkube-node"))
CGROUP_ROOT = Path("/sys/fs/cgroup")
CNI_CACHE = Path("/var/lib/cni")
SHIM_SOCKETS = Path("/run/containerd/s")
CONTAINER_LOG_LINKS = Path("/var/log/containers")
CONTAINERD_NAMESPACE = "k8s.io"  # the CRI plugin's namespace
# What kubelet sets at start-up when protectKernelDefaults is false (it refuses to start otherwise).
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
_MNT_DETACH = 2


@dataclass
class Footprint:
    run_id: str
    owner_pid: int
    owner_start: str
    node_dir: str
    containerd_root: str
    containerd_state: str
    containerd_address: str
    cgroup: str  # relative to each hierarchy, e.g. "llmkube-node-1a2b3c"
    cni_network: str
    sysctls: dict[str, str] = field(default_factory=dict)  # the values before any node tier ran

    @property
    def registry_file(self) -> Path:
        return REGISTRY / f"{self.run_id}.json"

    def register(self) -> None:
        REGISTRY.mkdir(parents=True, exist_ok=True)
        tmp = self.registry_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(self.registry_file)

    @classmethod
    def load(cls, path: Path) -> "Footprint":
        return cls(**json.loads(path.read_text()))


def process_start_time(pid: int) -> str:
    """Field 22 of /proc/PID/stat: with the PID, it tells a process from a later one reusing its PID."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def owner_alive(footprint: Footprint) -> bool:
    return process_start_time(footprint.owner_pid) == footprint.owner_start


def registered() -> list[Footprint]:
    found = []
    for path in sorted(REGISTRY.glob("*.json")) if REGISTRY.is_dir() else []:
        with contextlib.suppress(OSError, ValueError, TypeError):
            found.append(Footprint.load(path))
    return found


def original_sysctls() -> dict[str, str]:
    """The values to restore: inherited from a tier still running (kubelet already changed them)."""
    for other in registered():
        if owner_alive(other) and other.sysctls:
            return dict(other.sysctls)
    values = {}
    for key in KUBELET_SYSCTLS:
        with contextlib.suppress(OSError):
            values[key] = Path("/proc/sys", key).read_text().strip()
    return values


# -- cgroups ----------------------------------------------------------------------------------
def cgroup_hierarchies() -> list[Path]:
    """The mounted hierarchies: the unified one (v2), or one directory per v1 controller set."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT]
    return sorted(
        p
        for p in CGROUP_ROOT.iterdir()
        if p.is_dir() and not p.is_symlink() and (p / "cgroup.procs").exists()
    )


def create_cgroup(relative: str) -> None:
    """Create `relative` in every hierarchy. A new v1 cpuset group starts with no CPUs and no memory
    nodes, which forbids adding processes: copy them from the parent, level by level."""
    for hierarchy in cgroup_hierarchies():
        path = hierarchy
        for part in Path(relative).parts:
            parent, path = path, path / part
            path.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                own = path / name
                if own.exists() and not own.read_text().strip():
                    own.write_text((parent / name).read_text())


def cgroup_procs_files(relative: str) -> list[str]:
    """Every `cgroup.procs` below `relative`, in all hierarchies (for a child process to join)."""
    return [str(h / relative / "cgroup.procs") for h in cgroup_hierarchies() if (h / relative).is_dir()]


def _cgroup_pids(relative: str) -> set[int]:
    pids: set[int] = set()
    for hierarchy in cgroup_hierarchies():
        top = hierarchy / relative
        if not top.is_dir():
            continue
        for dirpath, _, _ in os.walk(top):
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in Path(dirpath, "cgroup.procs").read_text().split())
    return pids


def kill_cgroup(relative: str, timeout: float = 15.0) -> int:
    """SIGKILL every process in the tree until it is empty; returns how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while pids := _cgroup_pids(relative) - {os.getpid()}:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed |= pids
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return len(killed)


def remove_cgroup(relative: str) -> None:
    for hierarchy in cgroup_hierarchies():
        top = hierarchy / relative
        if not top.is_dir():
            continue
        for dirpath, _, _ in sorted(os.walk(top), key=lambda entry: -len(entry[0])):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)


# -- processes, mounts, global files ------------------------------------------------------------
def _shims_of(address: str) -> Iterator[int]:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"containerd-shim-runc-v2") and address.encode() in args:
            yield int(proc.name)


def mounts_below(directory: str) -> list[str]:
    """Mount points at or below `directory`, deepest first (octal escapes of mountinfo decoded)."""
    prefix = directory.rstrip("/") + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point.startswith(prefix) or point == directory:
            points.append(point)
    return sorted(set(points), key=lambda p: (-p.count("/"), p))


def unmount_below(directory: str) -> int:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    count = 0
    for _ in range(5):  # stacked mounts need one pass per layer
        points = mounts_below(directory)
        if not points:
            break
        for point in points:
            if libc.umount2(point.encode(), _MNT_DETACH) == 0:
                count += 1
    return count


def _task_ids(footprint: Footprint) -> set[str]:
    """Our sandboxes' and containers' ids, from containerd's own directories."""
    ids: set[str] = set()
    for directory in (
        Path(footprint.containerd_state, "io.containerd.runtime.v2.task", CONTAINERD_NAMESPACE),
        Path(footprint.containerd_root, "io.containerd.grpc.v1.cri", "sandboxes"),
        Path(footprint.containerd_root, "io.containerd.grpc.v1.cri", "containers"),
    ):
        with contextlib.suppress(OSError):
            ids.update(entry.name for entry in directory.iterdir())
    return ids


def shim_socket(containerd_address: str, task_id: str) -> Path:
    """Where containerd 1.6 puts a shim's socket: a hash of its own address, namespace and task id."""
    digest = hashlib.sha256(
        os.path.join(containerd_address, CONTAINERD_NAMESPACE, task_id).encode()
    ).hexdigest()
    return SHIM_SOCKETS / digest


def _remove_global_files(footprint: Footprint, task_ids: set[str]) -> int:
    removed = 0
    for task_id in task_ids:
        targets = [shim_socket(footprint.containerd_address, task_id)]
        targets += list((CNI_CACHE / "results").glob(f"{footprint.cni_network}-{task_id}-*"))
        targets += list((CNI_CACHE / "results").glob(f"cni-loopback-{task_id}-*"))
        for target in targets:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
                removed += 1
    if CONTAINER_LOG_LINKS.is_dir():
        for link in CONTAINER_LOG_LINKS.iterdir():
            with contextlib.suppress(OSError):
                if link.is_symlink() and os.readlink(link).startswith(footprint.node_dir):
                    link.unlink()
                    removed += 1
    # Directories containerd, the CNI plugins and kubelet created on a machine that had none.
    for directory in (
        SHIM_SOCKETS,
        SHIM_SOCKETS.parent / "fifo",
        SHIM_SOCKETS.parent,
        CNI_CACHE / "results",
        CNI_CACHE,
        CONTAINER_LOG_LINKS,
    ):
        with contextlib.suppress(OSError):
            directory.rmdir()
    return removed


def _restore_sysctls(footprint: Footprint) -> None:
    if any(owner_alive(other) for other in registered() if other.run_id != footprint.run_id):
        return  # the last node tier to stop restores them
    for key, value in footprint.sysctls.items():
        with contextlib.suppress(OSError):
            Path("/proc/sys", key).write_text(value)


def clean_up(footprint: Footprint, *, keep: tuple[str, ...] = ("logs",)) -> dict[str, int]:
    """Remove all the tier left behind (idempotent); returns counts for the log line."""
    report = {"processes": kill_cgroup(footprint.cgroup)}
    shims = list(_shims_of(footprint.containerd_address))
    for pid in shims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    report["stray shims"] = len(shims)
    task_ids = _task_ids(footprint)
    report["mounts"] = unmount_below(footprint.node_dir)
    report["global files"] = _remove_global_files(footprint, task_ids)
    remove_cgroup(footprint.cgroup)
    _restore_sysctls(footprint)
    node_dir = Path(footprint.node_dir)
    if node_dir.is_dir() and not mounts_below(footprint.node_dir):  # never delete through a mount
        for entry in node_dir.iterdir():
            if entry.name not in keep:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
    footprint.registry_file.unlink(missing_ok=True)
    return report


def sweep_stale() -> list[str]:
    """Clean up after node tiers whose owner is gone (a run killed together with its janitor)."""
    cleaned = []
    for footprint in registered():
        if not owner_alive(footprint):
            clean_up(footprint)
            cleaned.append(footprint.run_id)
    return cleaned


def watch(registry_file: Path) -> int:
    """The janitor: block until the owner closes its end of our stdin. `done` means it cleaned up
    itself; end of file without it means it died, so clean up for it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the test run is not for us
    message = sys.stdin.buffer.read()
    if message.strip() == b"done" or not registry_file.exists():
        return 0
    footprint = Footprint.load(registry_file)
    t0 = time.monotonic()
    report = clean_up(footprint)
    print(
        f"llmkube node tier {footprint.run_id}: its owner died; cleaned up {report} "
        f"in {time.monotonic() - t0:.1f} s",
        file=sys.stderr,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "watch":
        return watch(Path(args[1]))
    if args == ["sweep"]:
        print("\n".join(sweep_stale()) or "nothing to clean")
        return 0
    print("usage: python -m llmkube_testing.node_cleanup watch FOOTPRINT.json | sweep", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
