"""The Model controller's (and the agent's) fetches behind a company proxy: through a real forward
proxy (llmkube_testing.forward_proxy, which relays the bytes and logs every target), with the
egress rules still asked about the host the source names, never about the proxy.

Names are resolved from a table on our side (what the controller's DNS says) and from another on
the proxy's (the network behind it): `models.corp.test` is a public address to the controller and
the test's file server to the proxy, so a fetch that succeeds went through the proxy."""

import socket
from collections.abc import AsyncIterator
from dataclasses import replace

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer
from llmkube_testing.forward_proxy import ForwardProxy

from llmkube.apimachinery.proxy import ProxyConfig
from llmkube.plan.model.egress import (
    EgressConfig,
    EgressPolicy,
    parse_allowed_hosts,
    parse_cidrs,
    policy_for,
)
from llmkube.sources import GuardedResolver, SourceNotAllowed, open_checked

HITS = web.AppKey("hits", list[str])
PUBLIC = "93.184.215.14"  # what models.corp.test is to the controller: a public address


class HostsFile(AbstractResolver):
    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self.lookups: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        if host not in self.table:
            raise OSError(socket.EAI_NONAME, "Name or service not known")
        return [
            {
                "hostname": host,
                "host": self.table[host],
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": 0,
            }
        ]

    async def close(self) -> None:
        pass


@pytest.fixture
async def files() -> AsyncIterator[TestServer]:
    app = web.Application()
    app[HITS] = []

    async def model(request: web.Request) -> web.Response:
        request.app[HITS].append(request.host)
        return web.Response(body=b"GGUF" + b"\0" * 60, headers={"ETag": '"v1"'})

    app.router.add_get("/m.gguf", model)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield server
    await server.close()


async def fetch(url: str, policy: EgressPolicy, ours: HostsFile) -> tuple[int, bytes]:
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(lambda: policy, ours))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        open_checked(
            session,
            "GET",
            url,
            lambda: policy,
            headers={},
            client_timeout=aiohttp.ClientTimeout(total=10),
            resolver=ours,
        ) as answer,
    ):
        return answer.status, await answer.read()


async def test_a_source_is_fetched_through_the_proxy_and_checked_as_the_host_it_names(
    files: TestServer,
) -> None:
    ours = HostsFile({"models.corp.test": PUBLIC})
    async with ForwardProxy.running(hosts={"models.corp.test": "127.0.0.1"}) as proxy:
        policy = EgressPolicy(proxy=ProxyConfig(http_proxy=proxy.url, https_proxy=proxy.url))
        status, body = await fetch(f"http://models.corp.test:{files.port}/m.gguf", policy, ours)
    assert status == 200 and body.startswith(b"GGUF")
    assert proxy.targets == [f"models.corp.test:{files.port}"]
    assert len(files.app[HITS]) == 1
    # the rules were asked about the name (our resolution of it), and the proxy's loopback
    # address, which the rules refuse to any source, was let through as the admin's proxy
    assert ours.lookups == ["models.corp.test"]


async def test_a_refused_host_is_never_asked_of_the_proxy(files: TestServer) -> None:
    ours = HostsFile({"mirror.corp.test": "10.96.0.5", "metadata.corp.test": "169.254.169.254"})
    async with ForwardProxy.running(hosts=dict.fromkeys(ours.table, "127.0.0.1")) as proxy:
        policy = policy_for(
            EgressConfig(service_cidrs=parse_cidrs("10.96.0.0/12"), proxy=ProxyConfig(http_proxy=proxy.url))
        )
        for name, why in (("mirror.corp.test", "Service network"), ("metadata.corp.test", "link-local")):
            with pytest.raises(SourceNotAllowed) as refused:
                await fetch(f"http://{name}:{files.port}/m.gguf", policy, ours)
            assert why in refused.value.detail
        # a name our DNS does not know cannot be checked: refused, not left to the proxy
        with pytest.raises(SourceNotAllowed) as unknown:
            await fetch(f"http://only-the-proxy.corp.test:{files.port}/m.gguf", policy, ours)
        assert "does not resolve here" in unknown.value.detail
        # nor is the proxy itself a source
        with pytest.raises(SourceNotAllowed):
            await fetch(f"{proxy.url}/m.gguf", policy, ours)
    assert proxy.records == []
    assert files.app[HITS] == []


async def test_a_name_only_the_proxy_resolves_is_fetched_when_the_admin_names_it(files: TestServer) -> None:
    ours = HostsFile({})
    async with ForwardProxy.running(hosts={"hub.corp.test": "127.0.0.1"}) as proxy:
        config = EgressConfig(
            allowed_hosts=parse_allowed_hosts("*.corp.test"), proxy=ProxyConfig(http_proxy=proxy.url)
        )
        status, _ = await fetch(f"http://hub.corp.test:{files.port}/m.gguf", policy_for(config), ours)
    assert status == 200
    assert proxy.targets == [f"hub.corp.test:{files.port}"]


async def test_no_proxy_and_the_cluster_s_own_addresses_go_direct(files: TestServer) -> None:
    ours = HostsFile({"mirror.models.svc": "127.0.0.1", "cache.corp.internal": "127.0.0.1"})
    allowed = parse_allowed_hosts(f"127.0.0.1:{files.port}")
    async with ForwardProxy.running() as proxy:
        config = EgressConfig(
            allowed_hosts=allowed,
            proxy=ProxyConfig(http_proxy=proxy.url, no_proxy=".corp.internal"),
        )
        policy = policy_for(config)
        # `.svc` is the cluster's: always direct (a proxy outside the cluster cannot reach it)
        assert ".svc" in policy.proxy.no_proxy.split(",")
        for name in ours.table:
            status, _ = await fetch(f"http://{name}:{files.port}/m.gguf", policy, ours)
            assert status == 200
        # the same names with no proxy bypass would have gone to the proxy
        bare = replace(policy, proxy=ProxyConfig(http_proxy=proxy.url))
        status, _ = await fetch(f"http://mirror.models.svc:{files.port}/m.gguf", bare, ours)
    assert status == 502  # the proxy cannot reach it (it does not know the name)
    assert proxy.targets == [f"mirror.models.svc:{files.port}"]
    assert len(files.app[HITS]) == 2


async def test_a_proxy_named_by_a_loopback_name_is_let_through_and_nothing_else_is(files: TestServer) -> None:
    # the proxy's name resolves to loopback, which the rules refuse to any source
    ours = HostsFile({"proxy.corp.test": "127.0.0.1", "models.corp.test": PUBLIC})
    async with ForwardProxy.running(hosts={"models.corp.test": "127.0.0.1"}) as proxy:
        named = f"http://proxy.corp.test:{proxy.port}"
        policy = EgressPolicy(proxy=ProxyConfig(http_proxy=named, no_proxy="direct.corp.test"))
        status, _ = await fetch(f"http://models.corp.test:{files.port}/m.gguf", policy, ours)
        assert status == 200
        # the same name as a source is a source like any other: refused (loopback), direct or not
        for source in (f"{named}/m.gguf", f"http://proxy.corp.test:{files.port}/m.gguf"):
            with pytest.raises(SourceNotAllowed) as refused:
                await fetch(source, policy, ours)
            assert "loopback" in refused.value.detail
    assert proxy.targets == [f"models.corp.test:{files.port}"]
