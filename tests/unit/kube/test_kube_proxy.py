"""The kube client behind a proxy, as kubectl: a kubeconfig's `proxy-url`, else HTTPS_PROXY /
NO_PROXY (loopback never), through a real forward proxy (llmkube_testing.forward_proxy) to a TLS
server that stands in for the API server (a certificate of the test's own CA for
`kubernetes.default.svc`, a name only the proxy resolves). tests/integration/test_usercli_proxy.py
does the same with the CLI against a real API server."""

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from llmkube_testing.forward_proxy import ForwardProxy
from llmkube_testing.pki import generate_pki

from llmkube.apimachinery.proxy import ProxyConfig
from llmkube.kube.rest.config import ConfigError, proxy_config
from llmkube.kube.rest.kubeconfig import ResolvedConfig, resolve
from llmkube.kube.rest.transport import AiohttpTransport, RequestTimeout

NAME = "kubernetes.default.svc"


@pytest.fixture
async def api_server(tmp_path: Path) -> AsyncIterator[tuple[int, Path]]:
    pki = generate_pki(tmp_path)
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(pki.serving_cert, pki.serving_key)

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"gitVersion": "v1.37.2"})

    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving)
    await site.start()
    yield runner.addresses[0][1], pki.ca_cert
    await runner.cleanup()


async def get_version(url: str, ca: Path, proxy: ProxyConfig) -> int:
    transport = AiohttpTransport(ssl.create_default_context(cafile=str(ca)), proxy=proxy)
    try:
        async with transport.send(
            "GET", url, headers={}, body=None, request_timeout=RequestTimeout()
        ) as answer:
            await answer.read()
            return answer.status
    finally:
        await transport.close()


async def test_https_proxy_carries_the_api_requests(api_server: tuple[int, Path]) -> None:
    port, ca = api_server
    async with ForwardProxy.running(hosts={NAME: "127.0.0.1"}, credentials="corp:s3cret") as proxy:
        status = await get_version(f"https://{NAME}:{port}/version", ca, ProxyConfig(https_proxy=proxy.url))
    assert status == 200
    # the URL's credentials went with the CONNECT (the proxy refuses a tunnel without them: 407)
    assert [(r.method, r.target, r.status) for r in proxy.records] == [("CONNECT", f"{NAME}:{port}", 200)]


async def test_proxy_url_carries_loopback_too_and_https_proxy_does_not(api_server: tuple[int, Path]) -> None:
    port, ca = api_server
    async with ForwardProxy.running() as proxy:
        direct = await get_version(
            f"https://127.0.0.1:{port}/version", ca, ProxyConfig(https_proxy=proxy.url)
        )
        assert direct == 200 and proxy.records == []
        through = await get_version(f"https://127.0.0.1:{port}/version", ca, ProxyConfig.through(proxy.url))
    assert through == 200
    assert proxy.tunnels == [f"127.0.0.1:{port}"]


def test_the_kubeconfig_proxy_url_wins_over_the_environment() -> None:
    config = {
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://k:6443", "proxy-url": "http://p:3128"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }
    resolved = resolve(config)
    assert resolved.proxy_url == "http://p:3128"
    proxy = proxy_config(resolved, {"HTTPS_PROXY": "http://other:1", "NO_PROXY": "*"})
    assert proxy.proxy_for("https://k:6443/api") == "http://p:3128"


def test_in_a_pod_the_api_server_s_service_address_is_never_proxied() -> None:
    env = {"HTTPS_PROXY": "http://proxy.corp:3128", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    proxy = proxy_config(ResolvedConfig(server="https://10.96.0.1:443"), env)
    assert proxy.proxy_for("https://10.96.0.1:443/api") is None
    assert proxy.proxy_for("https://api.example.com/") == "http://proxy.corp:3128"


def test_an_unusable_proxy_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="the cluster's proxy-url: proxy socks5://proxy:1080"):
        proxy_config(ResolvedConfig(server="https://k", proxy_url="socks5://user:pw@proxy:1080"), {})
    with pytest.raises(ConfigError, match="HTTPS_PROXY/HTTP_PROXY"):
        proxy_config(ResolvedConfig(server="https://k"), {"HTTPS_PROXY": "ftp://x"})
