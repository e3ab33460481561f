"""HTTPS_PROXY / HTTP_PROXY / NO_PROXY read as Go's httpproxy reads them (kubectl's rules): the
cases below are the ones its own tests and documentation state."""

import pytest

from llmkube.apimachinery.proxy import (
    ProxyConfig,
    ProxyURLError,
    in_cluster_bypass,
    no_proxy_matches,
    parse_proxy_url,
)

PROXY = "http://proxy.corp:3128"


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "direct"),
    [
        # localhost and loopback are never proxied, whatever NO_PROXY says
        ("", "localhost", 80, True),
        ("", "127.0.0.1", 443, True),
        ("", "127.9.9.9", 443, True),
        ("", "::1", 443, True),
        ("", "[::1]", 443, True),
        ("", "example.com", 443, False),
        ("*", "example.com", 443, True),
        # a domain matches itself and every name below it, never a name that only ends like it
        ("corp.example", "corp.example", 443, True),
        ("corp.example", "models.corp.example", 443, True),
        ("corp.example", "notcorp.example", 443, False),
        # a leading dot or "*." matches only the names below it
        (".corp.example", "corp.example", 443, False),
        (".corp.example", "a.corp.example", 443, True),
        ("*.corp.example", "corp.example", 443, False),
        ("*.corp.example", "a.b.corp.example", 443, True),
        # a port narrows an entry
        ("corp.example:8443", "corp.example", 8443, True),
        ("corp.example:8443", "corp.example", 443, False),
        ("10.0.0.1:80", "10.0.0.1", 80, True),
        ("10.0.0.1:80", "10.0.0.1", 443, False),
        # addresses and networks
        ("10.0.0.1", "10.0.0.1", 443, True),
        ("10.0.0.1", "10.0.0.2", 443, False),
        ("10.96.0.0/12", "10.100.3.4", 443, True),
        ("10.96.0.0/12", "10.112.0.1", 443, False),
        ("fd00:10:96::/112", "fd00:10:96::1", 443, True),
        ("[fd00::1]:443", "fd00::1", 443, True),
        # case, spaces, empty and malformed entries
        (" Corp.Example , ,", "MODELS.corp.example", 443, True),
        ("10.0.0.0/99,corp.example", "corp.example", 443, True),
        (".svc,.cluster.local", "llm.default.svc", 80, True),
        (".svc,.cluster.local", "llm.default.svc.cluster.local", 80, True),
        (".svc,.cluster.local", "api.openai.com", 443, False),
    ],
)
def test_no_proxy_matches_as_go_does(no_proxy: str, host: str, port: int, direct: bool) -> None:
    assert no_proxy_matches(no_proxy, host, port) is direct


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ""),
        ("proxy.corp:3128", "http://proxy.corp:3128"),
        ("http://proxy.corp:3128", "http://proxy.corp:3128"),
        ("HTTPS://proxy.corp", "https://proxy.corp"),
        ("http://user:pw@proxy.corp:3128", "http://user:pw@proxy.corp:3128"),
        ("10.0.0.5:8080", "http://10.0.0.5:8080"),
    ],
)
def test_parse_proxy_url(value: str, expected: str) -> None:
    assert parse_proxy_url(value) == expected


@pytest.mark.parametrize("value", ["socks5://proxy:1080", "ftp://proxy", "http://proxy:port"])
def test_unusable_proxies_say_why(value: str) -> None:
    with pytest.raises(ProxyURLError) as error:
        parse_proxy_url(value)
    assert "proxy" in str(error.value)


def test_a_password_is_never_in_the_error() -> None:
    with pytest.raises(ProxyURLError) as error:
        parse_proxy_url("socks5://user:secret@proxy:1080")
    assert "secret" not in str(error.value)


def test_environment_upper_case_first_and_no_fallback_between_schemes() -> None:
    config = ProxyConfig.from_environ(
        {"HTTPS_PROXY": "proxy.corp:3128", "https_proxy": "other:1", "no_proxy": ".internal"}
    )
    assert config == ProxyConfig(https_proxy="http://proxy.corp:3128", no_proxy=".internal")
    assert config.proxy_for("https://huggingface.co/x") == "http://proxy.corp:3128"
    # no HTTP_PROXY: plain http goes direct (Go does not fall back to HTTPS_PROXY)
    assert config.proxy_for("http://huggingface.co/x") is None
    assert config.proxy_for("https://hub.internal/x") is None
    assert config.proxy_for("https://127.0.0.1:6443/api") is None


def test_lower_case_variables_are_read_too() -> None:
    config = ProxyConfig.from_environ({"http_proxy": PROXY, "https_proxy": PROXY})
    assert config.proxy_for("http://example.com") == PROXY
    assert config.proxy_for("https://example.com") == PROXY
    assert config.proxy_for("ftp://example.com") is None


def test_a_kubeconfig_proxy_url_takes_every_request() -> None:
    config = ProxyConfig.through("proxy.corp:3128")
    assert config.proxy_for("https://127.0.0.1:6443/api") == PROXY
    assert config.proxy_for("https://anything") == PROXY
    assert config.proxies == (PROXY,)


def test_bypassing_adds_entries_once_and_environment_has_both_spellings() -> None:
    config = ProxyConfig(https_proxy=PROXY, no_proxy=".svc").bypassing(
        in_cluster_bypass(networks=["10.96.0.0/12"], hosts=["10.96.0.1"])
    )
    assert config.no_proxy == ".svc,.cluster.local,10.96.0.0/12,10.96.0.1"
    assert config.proxy_for("https://10.96.0.1/") is None
    assert config.environment() == {
        "HTTPS_PROXY": PROXY,
        "https_proxy": PROXY,
        "NO_PROXY": config.no_proxy,
        "no_proxy": config.no_proxy,
    }
    assert ProxyConfig().environment() == {}
    assert not ProxyConfig().enabled
