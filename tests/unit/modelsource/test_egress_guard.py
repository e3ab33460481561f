"""The egress policy enforced on real connections: a listener of the test's own counts every
connection made to it, so "refused" means nothing reached it, whatever spelling, name or redirect
led there; and what the policy allows is really fetched."""

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer
from modelsource_support import GGUFFactory, ModelHost

from llmkube.controllers.modelsource import HeaderReadOptions, read_remote_gguf_metadata
from llmkube.controllers.modelsource.fingerprint import probe_http_fingerprint
from llmkube.plan.model import HeaderFailure, ProbeFailure
from llmkube.plan.model.egress import EgressPolicy, parse_allowed_hosts
from llmkube.sources import GuardedResolver, SourceNotAllowed, open_checked


@dataclass
class Listener:
    """Counts connections; answers each with a 200 and an ETag (a target that would tell things)."""

    port: int = 0
    connections: int = 0
    server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.write(b'HTTP/1.1 200 OK\r\nETag: "secret"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
        await writer.drain()
        writer.close()


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    target = Listener()
    target.server = await asyncio.start_server(target._serve, "127.0.0.1", 0)
    target.port = target.server.sockets[0].getsockname()[1]
    yield target
    target.server.close()
    await target.server.wait_closed()


class HostsFile(AbstractResolver):
    """Names answered from a table, like /etc/hosts: the names a test needs, pointing where it wants."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self.lookups: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        address = self.table[host]
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": 0,
            }
        ]

    async def close(self) -> None:
        pass


@dataclass
class Guarded:
    policy: EgressPolicy = field(default_factory=EgressPolicy)

    def get(self) -> EgressPolicy:
        return self.policy


@pytest.fixture
async def guarded() -> AsyncIterator[tuple[aiohttp.ClientSession, Guarded]]:
    holder = Guarded()
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(holder.get))
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session, holder


@pytest.mark.parametrize(
    "spelling",
    [
        "http://127.0.0.1:{port}/m.gguf",
        "http://localhost:{port}/m.gguf",  # a name that resolves to loopback
        "http://[::ffff:127.0.0.1]:{port}/m.gguf",  # IPv4-mapped IPv6
        "http://2130706433:{port}/m.gguf",  # 127.0.0.1 in decimal
        "http://0x7f.0.0.1:{port}/m.gguf",  # in hex, which the system resolver accepts
        "http://0177.0.0.1:{port}/m.gguf",  # in octal
        "http://127.1:{port}/m.gguf",
        "http://0.0.0.0:{port}/m.gguf",  # reaches the host itself
        "http://[::]:{port}/m.gguf",
    ],
)
async def test_no_spelling_of_loopback_reaches_it(
    guarded: tuple[aiohttp.ClientSession, Guarded], listener: Listener, spelling: str
) -> None:
    session, _ = guarded
    url = spelling.format(port=listener.port)
    probe = await probe_http_fingerprint(session, url, policy=guarded[1].get)
    header = await read_remote_gguf_metadata(session, url, policy=guarded[1].get)
    assert probe.failure in (ProbeFailure.NOT_ALLOWED, ProbeFailure.CONNECTION), probe
    assert header.failure in (HeaderFailure.NOT_ALLOWED, HeaderFailure.CONNECTION), header
    assert listener.connections == 0
    assert probe.fingerprint is None  # nothing about the target is reported


async def test_a_refusal_says_why(guarded: tuple[aiohttp.ClientSession, Guarded], listener: Listener) -> None:
    session, holder = guarded
    probe = await probe_http_fingerprint(session, f"http://localhost:{listener.port}/x", policy=holder.get)
    assert probe.failure is ProbeFailure.NOT_ALLOWED
    assert probe.detail.startswith("localhost resolves to ")
    assert "is a loopback address" in probe.detail
    literal = await probe_http_fingerprint(
        session, "http://169.254.169.254/latest/meta-data/", policy=holder.get
    )
    assert (literal.failure, literal.detail) == (
        ProbeFailure.NOT_ALLOWED,
        "169.254.169.254 is a link-local address (cloud metadata services answer on 169.254.169.254)",
    )


async def test_an_allowed_host_is_fetched(
    guarded: tuple[aiohttp.ClientSession, Guarded], listener: Listener
) -> None:
    session, holder = guarded
    holder.policy = EgressPolicy(allowed=parse_allowed_hosts(f"127.0.0.1:{listener.port}"))
    probe = await probe_http_fingerprint(
        session, f"http://127.0.0.1:{listener.port}/m.gguf", policy=holder.get
    )
    assert probe.fingerprint is not None and probe.fingerprint.etag == '"secret"'
    assert listener.connections == 1


async def test_the_connection_goes_to_the_address_that_was_checked(listener: Listener) -> None:
    """One lookup, checked, and the connection to exactly what it returned (no second lookup that
    could answer differently: DNS rebinding)."""
    hosts = HostsFile({"models.example": "127.0.0.1"})
    holder = Guarded()
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(holder.get, hosts), use_dns_cache=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        url = f"http://models.example:{listener.port}/m.gguf"
        refused = await probe_http_fingerprint(session, url, policy=holder.get)
        assert refused.failure is ProbeFailure.NOT_ALLOWED
        assert refused.detail == "models.example resolves to 127.0.0.1; 127.0.0.1 is a loopback address"
        assert (hosts.lookups, listener.connections) == (["models.example"], 0)
        holder.policy = EgressPolicy(allowed=parse_allowed_hosts("models.example"))
        allowed = await probe_http_fingerprint(session, url, policy=holder.get)
        assert allowed.fingerprint is not None
        assert (hosts.lookups, listener.connections) == (["models.example", "models.example"], 1)


@pytest.fixture
async def redirector(listener: Listener) -> AsyncIterator[TestServer]:
    """An allowed host whose every answer redirects: to the forbidden listener, or hop after hop."""

    async def to_listener(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"http://127.0.0.1:{listener.port}/latest/meta-data/")

    async def to_localhost(request: web.Request) -> web.StreamResponse:
        raise web.HTTPTemporaryRedirect(f"http://localhost:{listener.port}/x")

    async def to_file(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("file:///etc/passwd")

    async def loop(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/loop")

    app = web.Application()
    app.router.add_route("*", "/to-listener", to_listener)
    app.router.add_route("*", "/to-localhost", to_localhost)
    app.router.add_route("*", "/to-file", to_file)
    app.router.add_route("*", "/loop", loop)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield server
    await server.close()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        (
            "/to-listener",
            "it redirected to http://127.0.0.1:{port}/latest/meta-data/: 127.0.0.1 is a loopback",
        ),
        ("/to-localhost", "it redirected to http://localhost:{port}/x: localhost resolves to"),
        ("/to-file", "it redirected to file:///etc/passwd: only http and https are fetched"),
    ],
)
async def test_every_redirect_hop_is_checked(
    guarded: tuple[aiohttp.ClientSession, Guarded],
    listener: Listener,
    redirector: TestServer,
    path: str,
    why: str,
) -> None:
    session, holder = guarded
    holder.policy = EgressPolicy(allowed=parse_allowed_hosts(f"127.0.0.1:{redirector.port}"))
    url = str(redirector.make_url(path))
    probe = await probe_http_fingerprint(session, url, policy=holder.get)
    header = await read_remote_gguf_metadata(session, url, policy=holder.get)
    assert probe.failure is ProbeFailure.NOT_ALLOWED and probe.detail.startswith(
        why.format(port=listener.port)
    )
    assert header.failure is HeaderFailure.NOT_ALLOWED and header.detail == probe.detail
    assert listener.connections == 0


async def test_redirects_end(guarded: tuple[aiohttp.ClientSession, Guarded], redirector: TestServer) -> None:
    session, holder = guarded
    holder.policy = EgressPolicy(allowed=parse_allowed_hosts(f"127.0.0.1:{redirector.port}"))
    probe = await probe_http_fingerprint(session, str(redirector.make_url("/loop")), policy=holder.get)
    assert probe.failure is ProbeFailure.CONNECTION
    assert "more than 10 redirects" in probe.detail


async def test_an_allowed_redirect_is_followed(
    guarded: tuple[aiohttp.ClientSession, Guarded], model_host: ModelHost, make_gguf: GGUFFactory
) -> None:
    session, holder = guarded
    model_host.files["m.gguf"] = make_gguf(name="Redirected").read_bytes()
    holder.policy = EgressPolicy(allowed=parse_allowed_hosts("127.0.0.1"))
    app = web.Application()

    async def moved(request: web.Request) -> web.StreamResponse:
        raise web.HTTPMovedPermanently(model_host.url("/ranged/m.gguf"))

    app.router.add_route("*", "/old", moved)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        header = await read_remote_gguf_metadata(
            session, str(server.make_url("/old")), HeaderReadOptions(), policy=holder.get
        )
    finally:
        await server.close()
    assert header.metadata is not None and header.metadata.model_name == "Redirected"


async def test_open_checked_refuses_before_sending(guarded: tuple[aiohttp.ClientSession, Guarded]) -> None:
    session, holder = guarded
    with pytest.raises(SourceNotAllowed, match="only http and https"):
        async with open_checked(
            session,
            "GET",
            "ftp://example.com/x",
            holder.get,
            headers={},
            client_timeout=aiohttp.ClientTimeout(1),
        ):
            pass
