"""kubeconfig loading (client-go's rules), in-cluster configuration, token files and exec plugins.

Files are real files, plugins are real executables; the API server is not needed here (the
integration tests connect with each kind of credential)."""

import base64
import json
import os
import ssl
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from llmkube_testing.pki import generate_pki, issue_certificate

from llmkube.kube.rest.config import (
    TokenFileAuth,
    in_cluster,
    in_cluster_config,
    kubeconfig_paths,
    load_client_config,
    read_kubeconfigs,
)
from llmkube.kube.rest.exec_credential import ExecAuth, exec_environment, parse_exec_credential
from llmkube.kube.rest.kubeconfig import ConfigError, ExecPlugin, Material, merge_kubeconfigs, resolve


def kubeconfig(
    *,
    server: str = "https://h:6443",
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    name: str = "c",
    current: str | None = "c",
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": name, "user": user or {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }
    if current is not None:
        document["current-context"] = current
    return document


def write(path: Path, document: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


# -- merging and paths (pure) ------------------------------------------------------------------


def test_the_first_file_wins_each_entry_and_the_current_context() -> None:
    first = kubeconfig(server="https://first", name="shared", current="shared")
    second = kubeconfig(server="https://second", name="shared", current="other")
    second["clusters"].append({"name": "only-second", "cluster": {"server": "https://only-second"}})
    second["contexts"].append({"name": "other", "context": {"cluster": "only-second", "user": "shared"}})
    merged = merge_kubeconfigs([(Path("/a/config"), first), (Path("/b/config"), second)])
    assert merged["current-context"] == "shared"
    assert resolve(merged).server == "https://first"
    assert resolve(merged, "other").server == "https://only-second"


def test_relative_paths_are_relative_to_the_file_that_holds_them() -> None:
    document = kubeconfig(
        cluster={"certificate-authority": "pki/ca.crt"},
        user={
            "client-certificate": "pki/me.crt",
            "client-key": "/abs/me.key",
            "tokenFile": "token",
            "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/plugin"},
        },
    )
    resolved = resolve(merge_kubeconfigs([(Path("/home/me/.kube/config"), document)]))
    assert resolved.certificate_authority == Material(path=Path("/home/me/.kube/pki/ca.crt"))
    assert resolved.client_certificate == Material(path=Path("/home/me/.kube/pki/me.crt"))
    assert resolved.client_key == Material(path=Path("/abs/me.key"))
    assert resolved.token_file == Path("/home/me/.kube/token")
    assert resolved.exec_plugin is not None
    assert resolved.exec_plugin.command == "/home/me/.kube/bin/plugin"


def test_an_exec_command_without_a_path_is_looked_up_in_path() -> None:
    document = kubeconfig(
        user={
            "exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws", "args": ["eks"]}
        }
    )
    plugin = resolve(merge_kubeconfigs([(Path("/k/config"), document)])).exec_plugin
    assert plugin == ExecPlugin(
        command="aws", args=("eks",), api_version="client.authentication.k8s.io/v1beta1"
    )


def test_inline_data_wins_over_files() -> None:
    pem = b"-----BEGIN CERTIFICATE-----\n"
    document = kubeconfig(
        cluster={
            "certificate-authority": "/ca.crt",
            "certificate-authority-data": base64.b64encode(pem).decode(),
        },
        user={"client-key": "/k", "client-key-data": base64.b64encode(b"key").decode()},
    )
    resolved = resolve(document)
    assert resolved.certificate_authority == Material(data=pem)
    assert resolved.client_key == Material(data=b"key")


@pytest.mark.parametrize(
    ("document", "context", "message"),
    [
        (kubeconfig(current=None), None, "no context given and the kubeconfig has no current-context"),
        (kubeconfig(), "absent", "context 'absent' is not in the kubeconfig"),
        (
            {**kubeconfig(), "clusters": []},
            None,
            "context 'c': cluster 'c' is not in the kubeconfig",
        ),
        (kubeconfig(server=""), None, "cluster 'c' has no server"),
        (
            kubeconfig(user={"auth-provider": {"name": "gcp"}}),
            None,
            "user 'c': auth-provider 'gcp' was removed from Kubernetes clients; use its exec credential "
            "plugin instead (e.g. gke-gcloud-auth-plugin, kubelogin)",
        ),
        (
            kubeconfig(user={"username": "admin", "password": "x"}),
            None,
            "user 'c': basic authentication (username/password) is not supported by the API server since "
            "Kubernetes 1.19; use a token, a client certificate or an exec plugin",
        ),
        (
            kubeconfig(cluster={"certificate-authority-data": "not base64!"}),
            None,
            "cluster 'c' (certificate-authority-data) is not valid base64",
        ),
        (
            kubeconfig(user={"exec": {"apiVersion": "v1", "command": "x"}}),
            None,
            "user 'c': exec apiVersion 'v1' is not client.authentication.k8s.io/*",
        ),
        (
            kubeconfig(user={"exec": {"apiVersion": "client.authentication.k8s.io/v1"}}),
            None,
            "exec has no command",
        ),
    ],
)
def test_unusable_kubeconfigs_say_why(document: dict[str, Any], context: str | None, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        resolve(document, context)
    assert message in str(error.value)


def test_kubeconfig_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = write(tmp_path / "one", kubeconfig()), write(tmp_path / "two", kubeconfig())
    assert kubeconfig_paths(tmp_path / "explicit") == [tmp_path / "explicit"]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(one), str(tmp_path / "missing"), str(two)]))
    assert kubeconfig_paths() == [one, two]  # missing files in the list are skipped
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfig_paths() == [tmp_path / ".kube" / "config"]


def test_a_missing_or_broken_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read the kubeconfig .*absent: No such file"):
        read_kubeconfigs([tmp_path / "absent"])
    (tmp_path / "broken").write_text("clusters: [")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        read_kubeconfigs([tmp_path / "broken"])
    with pytest.raises(ConfigError, match="none of the files in"):
        read_kubeconfigs([])


# -- credentials and TLS ------------------------------------------------------------------------


async def test_a_token_becomes_a_bearer_header(tmp_path: Path) -> None:
    path = write(tmp_path / "config", kubeconfig(server="http://127.0.0.1:8080", user={"token": "abc"}))
    config = await load_client_config(path)
    assert (config.host, config.ssl_context) == ("http://127.0.0.1:8080", None)
    assert await config.auth.headers() == {"Authorization": "Bearer abc"}
    assert await config.auth.refresh() is False


async def test_a_token_file_is_read_again_after_a_rotation(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    auth = TokenFileAuth(token, reread_after=3600)
    assert await auth.headers() == {"Authorization": "Bearer first"}
    token.write_text("second\n")
    assert await auth.headers() == {"Authorization": "Bearer first"}  # within the re-read period
    assert await auth.refresh() is True  # a 401: read it now, worth a retry since it changed
    assert await auth.headers() == {"Authorization": "Bearer second"}
    assert await auth.refresh() is False  # unchanged: retrying would be refused again
    expiring = TokenFileAuth(token, reread_after=0)
    await expiring.headers()
    token.write_text("third")
    assert await expiring.headers() == {"Authorization": "Bearer third"}
    token.unlink()  # briefly missing while the kubelet replaces it: the last token stays in use
    assert await expiring.headers() == {"Authorization": "Bearer third"}


async def test_a_token_file_wins_over_an_inline_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file")
    path = write(tmp_path / "config", kubeconfig(user={"token": "inline", "tokenFile": "token"}))
    config = await load_client_config(path)
    assert await config.auth.headers() == {"Authorization": "Bearer from-file"}


async def test_an_unreadable_token_file_fails_at_load(tmp_path: Path) -> None:
    path = write(tmp_path / "config", kubeconfig(user={"tokenFile": "absent"}))
    with pytest.raises(ConfigError, match="cannot read the token file"):
        await load_client_config(path)


async def test_certificates_are_loaded_into_the_tls_context(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path / "pki")
    cert, key = issue_certificate(pki, "me", common_name="me", organizations=("system:masters",))
    inline = kubeconfig(
        cluster={"certificate-authority-data": base64.b64encode(pki.ca_cert.read_bytes()).decode()},
        user={
            "client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
            "client-key-data": base64.b64encode(key.read_bytes()).decode(),
        },
    )
    files = kubeconfig(
        cluster={"certificate-authority": str(pki.ca_cert), "tls-server-name": "kubernetes"},
        user={"client-certificate": str(cert), "client-key": str(key)},
    )
    for document in (inline, files):
        config = await load_client_config(write(tmp_path / "config", document))
        assert config.ssl_context is not None
        assert config.ssl_context.verify_mode == ssl.CERT_REQUIRED
        assert [c["subject"] for c in config.ssl_context.get_ca_certs()] == [
            ((("commonName", "llmkube-local-ca"),),)
        ]
    assert config.tls_server_name == "kubernetes"
    mismatched = kubeconfig(user={"client-certificate": str(cert), "client-key": str(pki.ca_key)})
    with pytest.raises(ConfigError, match="the client certificate or key cannot be used"):
        await load_client_config(write(tmp_path / "config", mismatched))
    half = kubeconfig(user={"client-certificate": str(cert)})
    with pytest.raises(ConfigError, match="needs both the certificate and its key"):
        await load_client_config(write(tmp_path / "config", half))


async def test_insecure_skip_tls_verify(tmp_path: Path) -> None:
    config = await load_client_config(
        write(tmp_path / "c", kubeconfig(cluster={"insecure-skip-tls-verify": True}))
    )
    assert config.ssl_context is not None
    assert (config.ssl_context.verify_mode, config.ssl_context.check_hostname) == (ssl.CERT_NONE, False)


def test_in_cluster_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("sa-token")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert not in_cluster(tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert in_cluster(tmp_path)
    resolved = in_cluster_config(tmp_path)
    assert resolved.server == "https://10.96.0.1:443"
    assert (resolved.token_file, resolved.certificate_authority) == (
        tmp_path / "token",
        Material(path=tmp_path / "ca.crt"),
    )
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    assert in_cluster_config(tmp_path).server == "https://[fd00::1]:443"


# -- exec plugins -------------------------------------------------------------------------------

PLUGIN = """#!{python}
import json, os, sys
from datetime import datetime, timedelta, timezone
calls = os.environ["PLUGIN_CALLS"]
with open(calls, "a") as f:
    f.write(os.environ["KUBERNETES_EXEC_INFO"] + "\\n")
count = sum(1 for _ in open(calls))
if os.environ.get("PLUGIN_FAIL"):
    sys.stderr.write("plugin: not logged in\\n")
    sys.exit(3)
expires = datetime.now(timezone.utc) + timedelta(seconds=float(os.environ.get("PLUGIN_TTL", "3600")))
stamp = expires.isoformat().replace("+00:00", "Z")
print(json.dumps({{
    "apiVersion": os.environ.get("PLUGIN_API", "client.authentication.k8s.io/v1"),
    "kind": "ExecCredential",
    "status": {{"token": f"token-{{count}}", "expirationTimestamp": stamp}},
}}))
"""


def plugin_kubeconfig(tmp_path: Path, **env: str) -> Path:
    plugin = tmp_path / "bin" / "plugin"
    plugin.parent.mkdir(parents=True, exist_ok=True)
    plugin.write_text(PLUGIN.format(python=sys.executable))
    plugin.chmod(0o755)
    exec_ = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "./bin/plugin",
        "env": [{"name": "PLUGIN_CALLS", "value": str(tmp_path / "calls")}]
        + [{"name": name, "value": value} for name, value in env.items()],
        "provideClusterInfo": True,
        "interactiveMode": "Never",
    }
    return write(tmp_path / "config", kubeconfig(server="https://plugin-test:6443", user={"exec": exec_}))


def calls(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]


async def test_an_exec_plugin_token_is_reused_until_refused(tmp_path: Path) -> None:
    config = await load_client_config(plugin_kubeconfig(tmp_path))
    assert await config.auth.headers() == {"Authorization": "Bearer token-1"}
    assert await config.auth.headers() == {"Authorization": "Bearer token-1"}
    assert len(calls(tmp_path)) == 1
    assert await config.auth.refresh() is True  # a 401
    assert await config.auth.headers() == {"Authorization": "Bearer token-2"}
    request = calls(tmp_path)[0]
    assert request == {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": {"server": "https://plugin-test:6443"}},
    }


async def test_an_expired_exec_token_is_fetched_again(tmp_path: Path) -> None:
    config = await load_client_config(plugin_kubeconfig(tmp_path, PLUGIN_TTL="1"))  # within the margin
    assert await config.auth.headers() == {"Authorization": "Bearer token-2"}
    assert await config.auth.headers() == {"Authorization": "Bearer token-3"}


async def test_a_failing_exec_plugin_says_why(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"exited with 3: plugin: not logged in"):
        await load_client_config(plugin_kubeconfig(tmp_path, PLUGIN_FAIL="1"))
    with pytest.raises(ConfigError, match=r"answered 'client.authentication.k8s.io/v1beta1'"):
        await load_client_config(
            plugin_kubeconfig(tmp_path, PLUGIN_API="client.authentication.k8s.io/v1beta1")
        )
    missing = ExecPlugin(command=str(tmp_path / "absent"), install_hint="install it with brew")
    with pytest.raises(ConfigError, match=r"cannot be run: .* \(install it with brew\)"):
        await ExecAuth(missing, {}).headers()


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ({}, "returned neither a token nor a client certificate"),
        ({"clientCertificateData": "c"}, "clientCertificateData and clientKeyData go together"),
        ({"token": "t", "expirationTimestamp": "tomorrow"}, "expirationTimestamp 'tomorrow' is not RFC 3339"),
    ],
)
def test_unusable_exec_credentials(status: dict[str, str], message: str) -> None:
    plugin = ExecPlugin(command="p")
    output = json.dumps({"apiVersion": plugin.api_version, "kind": "ExecCredential", "status": status})
    with pytest.raises(ConfigError, match=message):
        parse_exec_credential(output.encode(), plugin)
    with pytest.raises(ConfigError, match="printed no JSON ExecCredential"):
        parse_exec_credential(b"Please log in", plugin)


def test_exec_credential_expiry() -> None:
    plugin = ExecPlugin(command="p")
    later = datetime.now(UTC) + timedelta(hours=1)
    output = {
        "apiVersion": plugin.api_version,
        "kind": "ExecCredential",
        "status": {"token": "t", "expirationTimestamp": later.isoformat().replace("+00:00", "Z")},
    }
    credential = parse_exec_credential(json.dumps(output).encode(), plugin)
    assert credential.expires is not None and abs(credential.expires - later) < timedelta(seconds=1)
    assert not credential.expired(datetime.now(UTC))
    assert credential.expired(later - timedelta(seconds=5))  # refreshed shortly before the expiry


def test_exec_environment_keeps_ours_and_adds_the_plugins() -> None:
    plugin = ExecPlugin(command="p", env=(("AWS_PROFILE", "prod"),))
    env = exec_environment(plugin, {"server": "s"}, {"PATH": "/bin"})
    assert env["PATH"] == "/bin" and env["AWS_PROFILE"] == "prod"
    assert json.loads(env["KUBERNETES_EXEC_INFO"])["spec"] == {"interactive": False}  # no cluster info asked
