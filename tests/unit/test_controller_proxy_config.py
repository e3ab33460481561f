"""The controller's environment proxies become its configuration: its own fetches, the model
downloader's and the router pods' proxies, the cluster's own addresses bypassing them."""

import pytest

from llmkube.apimachinery.proxy import DIRECT
from llmkube.cli import build_parser
from llmkube.process.config import controllers_config

PROXY = "http://proxy.corp:3128"


def test_the_environment_s_proxies_reach_every_fetcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", ".corp.internal")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    args = build_parser().parse_args(
        ["controller", "--service-cidr=10.96.0.0/12", "--pod-cidr=10.244.0.0/16"]
    )
    config = controllers_config(args)
    assert config.model_egress.proxy.https_proxy == PROXY
    downloader = config.operator.download_proxy
    assert downloader == config.model.download_proxy == config.router.egress_proxy
    assert downloader.https_proxy == PROXY and downloader.http_proxy == ""
    assert downloader.no_proxy.split(",") == [
        ".corp.internal",
        ".svc",
        ".cluster.local",
        "10.96.0.0/12",
        "10.244.0.0/16",
        "10.96.0.1",
    ]


def test_no_proxy_in_the_environment_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    config = controllers_config(build_parser().parse_args(["controller"]))
    assert (
        config.operator.download_proxy == config.model.download_proxy == config.router.egress_proxy == DIRECT
    )


def test_an_unusable_proxy_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://proxy.corp:1080")
    with pytest.raises(ValueError, match=r"HTTPS_PROXY/HTTP_PROXY: proxy socks5://proxy.corp:1080"):
        controllers_config(build_parser().parse_args(["controller"]))
