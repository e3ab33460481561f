"""Reading kubeconfigs without kubernetes_asyncio: what each kind of entry becomes, which ones are
left to the full loader, and that the controller process never imports what it does not use."""

import base64
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from llmkube.kube.config import load_client_config
from llmkube.kube.kubeconfig import (
    ClusterSettings,
    FileOrData,
    KubeconfigError,
    TokenFileAuth,
    in_cluster_host,
    kubeconfig_paths,
    needs_full_loader,
    settings_from_kubeconfig,
)

BASE = Path("/etc/kube")


def kubeconfig(cluster: dict[str, Any], user: dict[str, Any], current: str = "ctx") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": current,
    }


@pytest.mark.parametrize(
    ("cluster", "user", "expected"),
    [
        (
            {"server": "https://api:6443/", "certificate-authority-data": base64.b64encode(b"CA").decode()},
            {"token": "abc"},
            ClusterSettings(host="https://api:6443", ca=FileOrData(data=b"CA"), token="abc"),
        ),
        (
            {"server": "https://api", "certificate-authority": "ca.crt", "tls-server-name": "kubernetes"},
            {"client-certificate": "/abs/c.crt", "client-key": "keys/c.key"},
            ClusterSettings(
                host="https://api",
                ca=FileOrData(path=BASE / "ca.crt"),
                client_certificate=FileOrData(path=Path("/abs/c.crt")),
                client_key=FileOrData(path=BASE / "keys/c.key"),
                tls_server_name="kubernetes",
            ),
        ),
        (
            {"server": "https://api", "insecure-skip-tls-verify": True},
            {"tokenFile": "token"},
            ClusterSettings(host="https://api", verify_tls=False, token_file=BASE / "token"),
        ),
        (
            {"server": "http://localhost:8080"},
            {"username": "admin", "password": "secret"},
            ClusterSettings(host="http://localhost:8080", basic_auth="admin:secret"),
        ),
        (
            {"server": "https://api"},
            {
                "client-certificate-data": base64.b64encode(b"CERT").decode(),
                "client-key-data": base64.b64encode(b"KEY").decode(),
            },
            ClusterSettings(
                host="https://api",
                client_certificate=FileOrData(data=b"CERT"),
                client_key=FileOrData(data=b"KEY"),
            ),
        ),
    ],
    ids=["token-and-ca-data", "cert-files-relative", "token-file-insecure", "basic-auth", "cert-data"],
)
def test_settings_from_kubeconfig(
    cluster: dict[str, Any], user: dict[str, Any], expected: ClusterSettings
) -> None:
    config = kubeconfig(cluster, user)
    assert not needs_full_loader(config, None)
    assert settings_from_kubeconfig(config, None, BASE) == expected


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        (
            {"server": "https://api"},
            {"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}},
        ),
        ({"server": "https://api"}, {"auth-provider": {"name": "oidc", "config": {}}}),
        ({"server": "https://api", "proxy-url": "http://proxy:3128"}, {"token": "abc"}),
    ],
    ids=["exec", "auth-provider", "proxy"],
)
def test_plugins_and_proxies_need_the_full_loader(cluster: dict[str, Any], user: dict[str, Any]) -> None:
    assert needs_full_loader(kubeconfig(cluster, user), None)


def test_an_explicit_context_wins_and_a_missing_one_is_an_error() -> None:
    config = kubeconfig({"server": "https://api"}, {"token": "abc"}, current="")
    with pytest.raises(KubeconfigError):
        settings_from_kubeconfig(config, None, BASE)
    assert settings_from_kubeconfig(config, "ctx", BASE).token == "abc"
    with pytest.raises(KubeconfigError):
        settings_from_kubeconfig(config, "nope", BASE)


def test_kubeconfig_paths() -> None:
    assert kubeconfig_paths("/x/config", {"KUBECONFIG": "/a:/b"}) == [Path("/x/config")]
    assert kubeconfig_paths(None, {"KUBECONFIG": "/a:/b"}) == [Path("/a"), Path("/b")]
    assert kubeconfig_paths(None, {}) == [Path("~/.kube/config").expanduser()]


def test_in_cluster_host() -> None:
    assert in_cluster_host({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}) == (
        "https://10.0.0.1:443"
    )
    assert in_cluster_host({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}) == (
        "https://[fd00::1]:6443"
    )


async def test_a_rotated_token_file_is_read_again_after_a_401(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    auth = TokenFileAuth(token_file=token, reread_seconds=3600)
    assert await auth.headers() == {"Authorization": "Bearer first"}
    token.write_text("second")
    assert await auth.headers() == {"Authorization": "Bearer first"}  # not re-read within the period
    assert await auth.refresh() is True
    assert await auth.headers() == {"Authorization": "Bearer second"}
    assert await auth.refresh() is False  # unchanged: retrying would not help


async def test_basic_and_static_tokens() -> None:
    assert await TokenFileAuth(basic_auth="a:b").headers() == {
        "Authorization": "Basic " + base64.b64encode(b"a:b").decode()
    }
    assert await TokenFileAuth(token="t").refresh() is False


TOKEN_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""


async def test_load_client_config_reads_a_token_kubeconfig_directly(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(TOKEN_KUBECONFIG)
    config = await load_client_config(path)
    assert config.host == "http://127.0.0.1:1"
    assert config.ssl_context is None
    assert await config.auth.headers() == {"Authorization": "Bearer abc"}


def test_the_controller_process_imports_no_unused_heavy_package(tmp_path: Path) -> None:
    """kubernetes_asyncio (a credential-plugin fallback), gguf and numpy (GGUF header reads) are
    imported only when used; the controller's own start-up path must not pull them in."""
    path = tmp_path / "config"
    path.write_text(TOKEN_KUBECONFIG)
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        import llmkube.cli
        from llmkube.controllers.setup import setup_controllers
        from llmkube.manager import Manager
        from llmkube.kube.config import load_client_config
        asyncio.run(load_client_config({str(path)!r}))
        print(sorted(m for m in ("kubernetes_asyncio", "gguf", "numpy") if m in sys.modules))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
