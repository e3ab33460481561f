"""The model downloader behind a company proxy: the planner gives the init container (and the
prefetch Job) the controller's proxies, and curl really goes through them (a real forward proxy,
llmkube_testing.forward_proxy, logs every target), except for what NO_PROXY names.

The Hub stand-in is addressed by a name only the proxy resolves (`hub.corp.test`): a download
that succeeds with it went through the proxy."""

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from llmkube_testing.forward_proxy import ForwardProxy
from llmkube_testing.hfhub import HubState, running_hub

from llmkube.api.model import Model
from llmkube.apimachinery.proxy import ProxyConfig
from llmkube.plan.model.download_scripts import downloader_script
from llmkube.plan.model.downloader import DownloadTarget, download_env
from llmkube.plan.model.egress import cluster_networks, parse_cidrs, proxy_bypassing_cluster
from llmkube.plan.model.remote import RemoteSource, remote_source

pytestmark = pytest.mark.skipif(
    shutil.which("sh") is None or shutil.which("curl") is None, reason="needs sh and curl"
)
FILES = {"m.gguf": os.urandom(200_000), "mmproj.gguf": os.urandom(3000)}


def planned_env(hub: HubState, cache: Path, proxy: ProxyConfig) -> dict[str, str]:
    model = Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ml"},
            "spec": {"source": "hf://org/tiny", "files": ["m.gguf"], "mmproj": "mmproj.gguf"},
        }
    )
    remote = remote_source(model, hub.base)
    assert isinstance(remote, RemoteSource)
    target = DownloadTarget(
        remote, "hf://org/tiny", str(cache), None, on_change=False, hf_endpoint=hub.base, proxy=proxy
    )
    env = {str(item["name"]): str(item.get("value", "")) for item in download_env(target)}
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}


async def run(env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        downloader_script(local_source=False, custom_ca=False),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode()


def test_the_downloader_gets_the_proxies_and_the_cluster_bypass_under_env() -> None:
    proxy = proxy_bypassing_cluster(
        ProxyConfig(http_proxy="http://proxy.corp:3128", https_proxy="http://proxy.corp:3128"),
        cluster_networks(parse_cidrs("10.96.0.0/12"), ()),
    )
    model = Model.model_validate({"metadata": {"name": "m"}, "spec": {"source": "https://x.example/m.gguf"}})
    remote = remote_source(model)
    assert isinstance(remote, RemoteSource)
    env = download_env(
        DownloadTarget(remote, "s", "/models/k", None, on_change=False, hf_endpoint="", proxy=proxy)
    )
    named = {str(item["name"]): item.get("value") for item in env}
    assert named["https_proxy"] == named["HTTPS_PROXY"] == "http://proxy.corp:3128"
    assert named["http_proxy"] == named["HTTP_PROXY"] == "http://proxy.corp:3128"
    assert named["NO_PROXY"] == named["no_proxy"] == ".svc,.cluster.local,10.96.0.0/12"
    # without a proxy nothing is added
    bare = download_env(DownloadTarget(remote, "s", "/models/k", None, on_change=False, hf_endpoint=""))
    assert not any("proxy" in str(item["name"]).lower() for item in bare)


async def test_the_files_come_through_the_proxy(tmp_path: Path) -> None:
    with running_hub() as hub:
        port = int(hub.base.rsplit(":", 1)[1])
        hub.base = f"http://hub.corp.test:{port}"  # its redirects name it too
        hub.lfs_threshold = 1024
        hub.add("org/tiny", FILES)
        async with ForwardProxy.running(hosts={"hub.corp.test": "127.0.0.1"}) as proxy:
            config = ProxyConfig(http_proxy=proxy.url, https_proxy=proxy.url, no_proxy=".svc,10.96.0.0/12")
            code, out = await run(planned_env(hub, tmp_path / "key", config))
    assert code == 0, out
    assert all((tmp_path / "key" / name).read_bytes() == body for name, body in FILES.items())
    # every request (probes, the Hub's redirect to its storage, the downloads) through the proxy
    assert proxy.records and set(proxy.targets) == {f"hub.corp.test:{port}"}
    assert len(proxy.records) == len(hub.requests)


async def test_what_no_proxy_names_goes_direct(tmp_path: Path) -> None:
    with running_hub() as hub:
        hub.add("org/tiny", FILES)
        host = hub.base.removeprefix("http://").rsplit(":", 1)[0]
        async with ForwardProxy.running() as proxy:
            config = ProxyConfig(http_proxy=proxy.url, no_proxy=f".svc,{host}")
            code, out = await run(planned_env(hub, tmp_path / "key", config))
    assert code == 0, out
    assert proxy.records == []
    assert hub.requests
