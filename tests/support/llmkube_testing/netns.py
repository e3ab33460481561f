"""A private network namespace for the node tier, and the ways in and out of it.

Everything the node tier runs (etcd, the API server, containerd, kubelet, kube-proxy, the pods'
bridge) lives in one network namespace that this module creates: its iptables rules, routes and
`ip_forward` setting are its own, the host's are never touched, and the namespace vanishes with its
last process. It is held by a `sleep` child that dies with this process, so there is no named
namespace (`ip netns`) to clean up after a crash.

Three ways to cross the boundary, all without moving the calling process:
- `child_setup()`: a `preexec_fn` that puts a child process inside before it executes;
- `run_inside(fn)`: runs `fn` on a short-lived thread that joined the namespace (network
  namespaces are per thread: sockets that thread opens belong to the namespace);
- `PortForward`: a loopback port of the host that leads to an address inside.
"""

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
Address = tuple[str, int]
# Where a forward leads: a fixed address, or one looked up per connection (None: not there yet).
Target = Address | Callable[[], Address | None]

CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1

try:  # loaded once in the parent: a child between fork and exec must not load libraries
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:
    _LIBC = None


class NetworkNamespaceError(RuntimeError):
    pass


def _libc() -> ctypes.CDLL:
    if _LIBC is None:
        raise NetworkNamespaceError("network namespaces need Linux (libc.so.6 is not loadable)")
    return _LIBC


def _setns(fd: int) -> None:
    if _libc().setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise NetworkNamespaceError(f"setns(CLONE_NEWNET): {os.strerror(errno)}")


@dataclass(frozen=True)
class NetworkLayout:
    """The addresses inside the namespace. The node's own address sits on the pods' bridge, so
    pods reach the node (API server, kubelet) directly, and the node reaches Service addresses
    through a route over the bridge (kube-proxy's iptables rules rewrite them)."""

    bridge: str = "llmkube0"
    node_ip: str = "10.88.0.1"
    pod_cidr: str = "10.88.0.0/16"
    service_cidr: str = "10.0.0.0/24"

    @property
    def prefix_length(self) -> int:
        return int(self.pod_cidr.split("/")[1])


class PrivateNetwork:
    """Create with `create()`, remove with `close()` (the namespace goes when its last process does)."""

    def __init__(self, layout: NetworkLayout | None = None) -> None:
        self.layout = layout or NetworkLayout()
        self._holder: subprocess.Popen[bytes] | None = None
        self._fd: int | None = None

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise NetworkNamespaceError("the private network namespace was not created")
        return self._fd

    @property
    def path(self) -> str:
        assert self._holder is not None
        return f"/proc/{self._holder.pid}/ns/net"

    def create(self) -> "PrivateNetwork":
        libc = _libc()

        def become_holder() -> None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if libc.unshare(CLONE_NEWNET) != 0:
                os._exit(97)

        self._holder = subprocess.Popen(
            ["sleep", "infinity"], preexec_fn=become_holder, stdin=subprocess.DEVNULL, close_fds=True
        )
        ns_path = self.path
        try:
            # The holder has unshared once its namespace differs from ours.
            own = os.stat("/proc/self/ns/net").st_ino
            for _ in range(500):
                if self._holder.poll() is not None:
                    raise NetworkNamespaceError(
                        f"could not create a network namespace (exit {self._holder.returncode}): needs root"
                    )
                with contextlib.suppress(FileNotFoundError):
                    if os.stat(ns_path).st_ino != own:
                        break
                threading.Event().wait(0.01)
            else:
                raise NetworkNamespaceError("the network namespace holder never unshared")
            self._fd = os.open(ns_path, os.O_RDONLY | os.O_CLOEXEC)
            self._configure()
        except BaseException:
            self.close()
            raise
        return self

    def _configure(self) -> None:
        lay = self.layout
        for args in (
            ["ip", "link", "set", "lo", "up"],
            ["ip", "link", "add", lay.bridge, "type", "bridge"],
            ["ip", "addr", "add", f"{lay.node_ip}/{lay.prefix_length}", "dev", lay.bridge],
            ["ip", "link", "set", lay.bridge, "up"],
            # Service addresses are virtual: route them over the bridge so kube-proxy's rules see them.
            ["ip", "route", "add", lay.service_cidr, "dev", lay.bridge, "src", lay.node_ip],
        ):
            self.run(args)
        # ip_forward is per namespace: pods talk to each other and to Services through the node.
        self.run_inside(lambda: _write("/proc/sys/net/ipv4/ip_forward", "1"))

    def run(self, args: list[str]) -> str:
        """Run a command inside; raise with its output when it fails."""
        result = subprocess.run(
            args, preexec_fn=self.child_setup(), capture_output=True, text=True, check=False, timeout=60
        )
        if result.returncode != 0:
            raise NetworkNamespaceError(
                f"{' '.join(args)}: exit {result.returncode}: {result.stderr.strip()}"
            )
        return result.stdout

    def child_setup(self, on_parent_death: signal.Signals = signal.SIGTERM) -> Callable[[], None]:
        """A `preexec_fn`: join the namespace and get `on_parent_death` when this process dies."""
        fd, libc = self.fd, _libc()

        def setup() -> None:
            libc.prctl(_PR_SET_PDEATHSIG, on_parent_death)
            if libc.setns(fd, CLONE_NEWNET) != 0:
                os._exit(98)

        return setup

    def enter_current_thread(self) -> None:
        """Move the calling thread (and the threads it starts later) inside. Sockets it opened
        before stay where they are: open listening ports for the outside first."""
        _setns(self.fd)

    def run_inside(self, fn: Callable[[], T], timeout: float = 60.0) -> T:
        """Call `fn` on a fresh thread inside the namespace and return its result (or raise its error)."""
        outcome: list[T] = []
        failure: list[BaseException] = []

        def target() -> None:
            try:
                _setns(self.fd)
                outcome.append(fn())
            except BaseException as err:
                failure.append(err)

        thread = threading.Thread(target=target, name="in-private-netns", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"call inside the network namespace still running after {timeout:.0f}s")
        if failure:
            raise failure[0]
        return outcome[0]

    def forward(self, target: Target, listen_port: int = 0) -> "PortForward":
        """Call from outside the namespace: the listening port is opened where the caller is."""
        return PortForward(self, target, listen_port).start()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._holder is not None and self._holder.poll() is None:
            self._holder.kill()
            self._holder.wait()


def _write(path: str, value: str) -> None:
    with open(path, "w") as file:
        file.write(value)


class PortForward:
    """127.0.0.1:<port> on the host, connected byte for byte to `target` inside the namespace.

    The listening socket is opened by the caller (outside); the accepting thread joins the namespace
    so the connections it opens to the target are made inside. Each connection is pumped by two
    threads. Stops with `close()` (or with the process: the threads are daemons)."""

    def __init__(self, network: PrivateNetwork, target: Target, listen_port: int = 0) -> None:
        self.network = network
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", listen_port), reuse_port=False)
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"forward-{self.port}", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "PortForward":
        self._thread.start()
        return self

    def _serve(self) -> None:
        _setns(self.network.fd)
        self._listener.settimeout(0.5)
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            try:
                address = self.target() if callable(self.target) else self.target
                if address is None:
                    raise ConnectionRefusedError("no target yet")
                upstream = socket.create_connection(address, timeout=10)
            except Exception:  # no target (yet), or it is not listening: the client sees a reset
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            _Connection(client, upstream).start()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(timeout=2)


class _Connection:
    """One forwarded connection: a thread per direction; each passes its end of stream on, and the
    second to finish closes both sockets (closing earlier would cut the other direction short)."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self._sockets = (client, upstream)
        self._lock = threading.Lock()
        self._running = 2

    def start(self) -> None:
        client, upstream = self._sockets
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
        with self._lock:
            self._running -= 1
            last = self._running == 0
        if last:
            for sock in self._sockets:
                sock.close()
