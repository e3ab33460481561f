"""The router's external providers behind a company proxy: CONNECT tunnels through a real forward
proxy (llmkube_testing.forward_proxy, which relays the bytes and logs each target), TLS to the
provider inside the tunnel, the provider's address still checked by the router's egress rules
before the proxy is asked, and the cluster's own addresses and the pods never sent to the proxy."""

import asyncio
import ipaddress
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from llmkube_testing.forward_proxy import ForwardProxy
from llmkube_testing.pki import generate_pki

from llmkube.apimachinery.proxy import ProxyConfig
from llmkube.router.http import ConnectFailed, Origin, Pool, Tunnel
from llmkube.router.upstream import EgressRefused, Upstreams, proxy_route

PROVIDER = "93.184.215.14"  # a public address: the proxy knows where it really is (the test's server)
SEEN = web.AppKey("seen", list[str])


def provider_app() -> web.Application:
    app = web.Application()
    app[SEEN] = []

    async def chat(request: web.Request) -> web.Response:
        request.app[SEEN].append(request.host)
        return web.json_response({"object": "chat.completion", "host": request.host})

    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.fixture
async def provider() -> AsyncIterator[TestServer]:
    server = TestServer(provider_app(), host="127.0.0.1")
    await server.start_server()
    yield server
    await server.close()


async def test_an_external_provider_is_reached_through_the_proxy(provider: TestServer) -> None:
    async with ForwardProxy.running(hosts={PROVIDER: "127.0.0.1"}, credentials="corp:pw") as proxy:
        upstreams = Upstreams(
            stream_idle_timeout=5,
            api_servers=(),
            proxy=ProxyConfig(http_proxy=proxy.url, https_proxy=proxy.url),
        )
        try:
            url = f"http://{PROVIDER}:{provider.port}/v1/chat/completions"
            answer = await upstreams.send(
                url, "POST", [("Content-Type", "application/json")], b"{}", external=True
            )
            body = await answer.read()
        finally:
            await upstreams.close()
    assert answer.status == 200, body
    # the provider saw its own name in Host (the tunnel is invisible to it)
    assert provider.app[SEEN] == [f"{PROVIDER}:{provider.port}"]
    assert proxy.records and [(r.method, r.target, r.status) for r in proxy.records] == [
        ("CONNECT", f"{PROVIDER}:{provider.port}", 200)
    ]


async def test_a_refused_address_is_never_asked_of_the_proxy(provider: TestServer) -> None:
    async with ForwardProxy.running(hosts={"169.254.169.254": "127.0.0.1"}) as proxy:
        upstreams = Upstreams(stream_idle_timeout=5, api_servers=(), proxy=ProxyConfig(http_proxy=proxy.url))
        try:
            with pytest.raises(EgressRefused):
                await upstreams.send(
                    f"http://169.254.169.254:{provider.port}/v1/chat/completions",
                    "POST",
                    [],
                    b"{}",
                    external=True,
                )
        finally:
            await upstreams.close()
    assert proxy.records == []
    assert provider.app[SEEN] == []


async def test_the_pods_of_inference_services_are_never_proxied(provider: TestServer) -> None:
    async with ForwardProxy.running() as proxy:
        upstreams = Upstreams(stream_idle_timeout=5, api_servers=(), proxy=ProxyConfig(http_proxy=proxy.url))
        try:
            answer = await upstreams.send(
                f"http://127.0.0.1:{provider.port}/v1/chat/completions", "POST", [], b"{}", external=False
            )
            await answer.read()
        finally:
            await upstreams.close()
    assert answer.status == 200
    assert proxy.records == []


async def test_a_tunnel_the_proxy_refuses_is_a_connect_failure_naming_its_answer() -> None:
    # the proxy cannot reach the provider (nothing listens there): it answers 502 to CONNECT
    async with ForwardProxy.running(hosts={PROVIDER: "127.0.0.1"}) as proxy:
        upstreams = Upstreams(stream_idle_timeout=5, api_servers=(), proxy=ProxyConfig(https_proxy=proxy.url))
        try:
            with pytest.raises(ConnectFailed) as failed:
                await upstreams.send(f"https://{PROVIDER}:9/v1/models", "GET", [], external=True)
        finally:
            await upstreams.close()
    assert "proxy answered 502 to CONNECT" in str(failed.value)
    assert proxy.tunnels == [f"{PROVIDER}:9"]


async def test_tls_to_the_provider_inside_the_tunnel(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(pki.serving_cert, pki.serving_key)
    runner = web.AppRunner(provider_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving)
    await site.start()
    port = runner.addresses[0][1]
    trusting = ssl.create_default_context(cafile=str(pki.ca_cert))
    try:
        async with ForwardProxy.running(hosts={"kubernetes.default.svc": "127.0.0.1"}) as proxy:
            tunnel = Tunnel(Origin("http", proxy.host, proxy.port))
            pool = Pool(keepalive=5, read_timeout=5, ssl_context=trusting, route=lambda origin: tunnel)
            origin = Origin("https", "kubernetes.default.svc", port)
            try:
                answers = []
                for _ in range(2):  # the second request reuses the tunnel's kept-alive connection
                    answer = await pool.send(origin, "POST", "/v1/chat/completions", [], b"{}")
                    answers.append((answer.status, await answer.read()))
            finally:
                await pool.close()
    finally:
        await runner.cleanup()
    assert [status for status, _ in answers] == [200, 200]
    assert b"kubernetes.default.svc" in answers[0][1]
    assert proxy.tunnels == [f"kubernetes.default.svc:{port}"]


@pytest.mark.parametrize(
    ("origin", "proxied"),
    [
        (Origin("https", "api.openai.com", 443), True),
        (Origin("http", "api.example.com", 8080), True),
        (Origin("http", "llm.team-a.svc", 8080), False),
        (Origin("http", "llm.team-a.svc.cluster.local", 8080), False),
        (Origin("https", "10.96.0.1", 443), False),  # the API server's Service address
        (Origin("https", "models.corp.internal", 443), False),  # NO_PROXY
        (Origin("https", "10.20.30.40", 443), False),  # NO_PROXY's CIDR
    ],
)
def test_which_external_origins_go_to_the_proxy(origin: Origin, proxied: bool) -> None:
    route = proxy_route(
        ProxyConfig(
            https_proxy="http://u:p%40ss@proxy.corp:3128",
            http_proxy="http://proxy.corp:3128",
            no_proxy=".corp.internal,10.20.0.0/16",
        ),
        api_servers=((ipaddress.ip_address("10.96.0.1"), 443),),
    )
    assert route is not None
    tunnel = route(origin)
    assert (tunnel is not None) is proxied
    if tunnel is not None:
        assert tunnel.proxy == Origin("http", "proxy.corp", 3128)
        # credentials of the URL, percent-decoded, as Basic
        expected = "Basic dTpwQHNz" if origin.tls else ""
        assert tunnel.authorization == expected
    assert proxy_route(ProxyConfig()) is None


async def test_connect_timeouts_apply_to_the_proxy() -> None:
    # a proxy that accepts and never answers
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Pool(
        keepalive=5,
        read_timeout=5,
        connect_timeout=0.3,
        route=lambda o: Tunnel(Origin("http", "127.0.0.1", port)),
    )
    try:
        with pytest.raises(ConnectFailed) as failed:
            await pool.send(Origin("https", "api.example.com", 443), "GET", "/", [])
    finally:
        await pool.close()
        server.close()
    assert "within 0.3s" in str(failed.value)
