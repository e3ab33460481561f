"""The user commands on a company network, through a real forward proxy (llmkube_testing's
ForwardProxy relays the bytes; its log says what went through it), with kubectl's rules: a
kubeconfig's `proxy-url` takes every request to its cluster, loopback included; HTTPS_PROXY takes
the requests NO_PROXY does not name, and never a loopback address.

The API server is reached by a name only the proxy resolves (`kubernetes.default.svc`, in the
server's certificate): a command that succeeds with it went through the proxy."""

import asyncio
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from llmkube_testing.forward_proxy import ForwardProxy
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests

from llmkube.api.crds import all_crds

PROXIED_NAME = "kubernetes.default.svc"


async def llmkube(env: dict[str, str], *args: str, within: float = 60) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llmkube.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    out, err = await asyncio.wait_for(process.communicate(), within)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def kubeconfig_with(source: Path, target: Path, *, server: str | None = None, proxy_url: str = "") -> Path:
    config = yaml.safe_load(source.read_text())
    for entry in config["clusters"]:
        cluster = entry["cluster"]
        if server is not None:
            cluster["server"] = server
        if proxy_url:
            cluster["proxy-url"] = proxy_url
    target.write_text(yaml.safe_dump(config))
    return target


@pytest.fixture
def crds(api_cluster: ClusterHandle) -> ClusterHandle:
    apply_manifests(api_cluster, all_crds())
    return api_cluster


async def test_a_kubeconfig_proxy_url_carries_every_request_loopback_included(
    crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    port = urlsplit(crds.server).port
    async with ForwardProxy.running() as proxy:
        kubeconfig = kubeconfig_with(crds.kubeconfig, tmp_path / "kubeconfig", proxy_url=proxy.url)
        # HTTPS_PROXY and NO_PROXY say otherwise: proxy-url wins, as in kubectl
        env = {"KUBECONFIG": str(kubeconfig), "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "*"}
        code, out, err = await llmkube(env, "list", "-n", namespace)
    assert code == 0, out + err
    assert proxy.tunnels and set(proxy.tunnels) == {f"127.0.0.1:{port}"}, proxy.records


async def test_https_proxy_carries_the_requests_to_a_name_only_the_proxy_resolves(
    crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    port = urlsplit(crds.server).port
    server = f"https://{PROXIED_NAME}:{port}"
    kubeconfig = kubeconfig_with(crds.kubeconfig, tmp_path / "kubeconfig", server=server)
    async with ForwardProxy.running(hosts={PROXIED_NAME: "127.0.0.1"}) as proxy:
        env = {"KUBECONFIG": str(kubeconfig), "HTTPS_PROXY": proxy.address, "NO_PROXY": "10.0.0.0/8,.corp"}
        code, out, err = await llmkube(env, "list", "-n", namespace)
    assert code == 0, out + err
    assert set(proxy.tunnels) == {f"{PROXIED_NAME}:{port}"}, proxy.records


async def test_an_https_proxy_that_wants_credentials_gets_those_of_its_url(
    crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    port = urlsplit(crds.server).port
    kubeconfig = kubeconfig_with(
        crds.kubeconfig, tmp_path / "kubeconfig", server=f"https://{PROXIED_NAME}:{port}"
    )
    async with ForwardProxy.running(hosts={PROXIED_NAME: "127.0.0.1"}, credentials="corp:s3cret") as proxy:
        env = {"KUBECONFIG": str(kubeconfig), "HTTPS_PROXY": proxy.url}
        code, out, err = await llmkube(env, "list", "-n", namespace)
    assert code == 0, out + err
    assert {record.status for record in proxy.records} == {200}, proxy.records


async def test_no_proxy_and_loopback_go_direct(crds: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    port = urlsplit(crds.server).port
    async with ForwardProxy.running(hosts={PROXIED_NAME: "127.0.0.1"}) as proxy:
        # the loopback server of the admin kubeconfig: direct, although HTTPS_PROXY is set
        env = {"KUBECONFIG": str(crds.kubeconfig), "HTTPS_PROXY": proxy.url}
        code, out, err = await llmkube(env, "list", "-n", namespace)
        assert code == 0, out + err
        # a name NO_PROXY covers: direct, where it does not resolve (only the proxy knows it)
        kubeconfig = kubeconfig_with(
            crds.kubeconfig, tmp_path / "kubeconfig", server=f"https://{PROXIED_NAME}:{port}"
        )
        env = {"KUBECONFIG": str(kubeconfig), "HTTPS_PROXY": proxy.url, "NO_PROXY": ".svc"}
        code, out, err = await llmkube(env, "list", "-n", namespace, within=90)
    assert code != 0 and PROXIED_NAME in err, out + err
    assert proxy.records == []


async def test_an_unusable_proxy_setting_says_so(crds: ClusterHandle, tmp_path: Path) -> None:
    kubeconfig = kubeconfig_with(
        crds.kubeconfig, tmp_path / "kubeconfig", proxy_url="socks5://user:pw@proxy:1080"
    )
    code, _, err = await llmkube({"KUBECONFIG": str(kubeconfig)}, "list")
    assert code != 0 and "Traceback" not in err, err
    assert "proxy-url" in err and "socks5" in err and "pw" not in err, err
