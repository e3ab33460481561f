"""kubeconfig files -> where the API server is and which credentials to use, as data (no I/O).

The rules are client-go's (`clientcmd`), for the parts a controller uses:

* Several files (`$KUBECONFIG` is a list) merge entry by entry: the first file that names a
  cluster, user or context wins it, and the first `current-context` wins.
* Relative file paths (certificates, keys, token files, an exec command given as a path) are
  relative to the file that holds them, resolved before merging.
* Inline data wins over a file (`certificate-authority-data` over `certificate-authority`, ...);
  a `tokenFile` wins over `token` (it is re-read, so a rotated token is picked up).
* Credentials: a bearer token (inline or file), a client certificate, or an exec plugin
  (`client.authentication.k8s.io` ExecCredential). The legacy `auth-provider` and basic auth
  (removed from the API server in 1.19) are refused with a message naming the alternative.

Reading the files and running plugins is `llmkube.kube.rest.config`'s job.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ConfigError",
    "ExecPlugin",
    "Material",
    "ResolvedConfig",
    "merge_kubeconfigs",
    "resolve",
]


class ConfigError(Exception):
    """The kubeconfig cannot be used; the message says which entry and why."""


@dataclass(frozen=True)
class Material:
    """PEM (or token) bytes given inline, or the path of a file that holds them."""

    data: bytes | None = None
    path: Path | None = None

    def __bool__(self) -> bool:
        return self.data is not None or self.path is not None


@dataclass(frozen=True)
class ExecPlugin:
    """A `users[].user.exec` entry: a command that prints an ExecCredential."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = "client.authentication.k8s.io/v1"
    install_hint: str = ""
    provide_cluster_info: bool = False


@dataclass(frozen=True)
class ResolvedConfig:
    server: str
    certificate_authority: Material = field(default_factory=Material)
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    client_certificate: Material = field(default_factory=Material)
    client_key: Material = field(default_factory=Material)
    token: str | None = None
    token_file: Path | None = None
    exec_plugin: ExecPlugin | None = None
    #: what an exec plugin with provideClusterInfo receives (ExecCredential spec.cluster)
    cluster_info: Mapping[str, Any] = field(default_factory=dict)
    #: the context's namespace (the user commands' default), None when it names none
    namespace: str | None = None
    #: the cluster's `proxy-url`: every request to it goes through that proxy (client-go's rule)
    proxy_url: str | None = None


_PATH_KEYS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


def _absolute(base: Path, value: object) -> object:
    if isinstance(value, str) and value and not Path(value).is_absolute():
        return str(base / value)
    return value


def _with_absolute_paths(document: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """A copy of one file's document whose relative paths are made absolute against `base`."""
    result = dict(document)
    for section, inner in (("clusters", "cluster"), ("users", "user")):
        entries = []
        for entry in document.get(section) or ():
            if not isinstance(entry, Mapping) or not isinstance(entry.get(inner), Mapping):
                entries.append(entry)
                continue
            body = dict(entry[inner])
            for key in _PATH_KEYS[inner]:
                if key in body:
                    body[key] = _absolute(base, body[key])
            exec_ = body.get("exec")
            # A command given as a path ("./bin/plugin") is relative to the file; a bare name is
            # looked up in $PATH, as client-go does.
            if isinstance(exec_, Mapping) and "/" in str(exec_.get("command", "")):
                body["exec"] = {**exec_, "command": _absolute(base, exec_["command"])}
            entries.append({**entry, inner: body})
        if section in document:
            result[section] = entries
    return result


def merge_kubeconfigs(documents: Sequence[tuple[Path, Mapping[str, Any] | None]]) -> dict[str, Any]:
    """Merge parsed kubeconfig files, in order of precedence (each with the path it came from)."""
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    seen: dict[str, set[str]] = {"clusters": set(), "users": set(), "contexts": set()}
    for path, document in documents:
        if not document:
            continue  # an empty file
        if not isinstance(document, Mapping):
            raise ConfigError(f"{path}: not a kubeconfig (a YAML mapping is expected)")
        document = _with_absolute_paths(document, path.parent)
        if "current-context" not in merged and document.get("current-context"):
            merged["current-context"] = document["current-context"]
        for section in ("clusters", "users", "contexts"):
            for entry in document.get(section) or ():
                name = entry.get("name") if isinstance(entry, Mapping) else None
                if isinstance(name, str) and name not in seen[section]:
                    seen[section].add(name)
                    merged[section].append(entry)
    return merged


def _named(config: Mapping[str, Any], section: str, inner: str, name: str) -> Mapping[str, Any] | None:
    for entry in config.get(section) or ():
        if entry.get("name") == name:
            body = entry.get(inner)
            return body if isinstance(body, Mapping) else {}
    return None


def _decoded(value: object, what: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError) as error:
        raise ConfigError(f"{what} is not valid base64: {error}") from None


def _material(body: Mapping[str, Any], key: str, what: str) -> Material:
    data = body.get(f"{key}-data")
    if data:
        return Material(data=_decoded(data, f"{what} ({key}-data)"))
    path = body.get(key)
    return Material(path=Path(path)) if path else Material()


def _exec_plugin(body: Mapping[str, Any], user_name: str) -> ExecPlugin:
    command = body.get("command")
    if not isinstance(command, str) or not command:
        raise ConfigError(f"user {user_name!r}: exec has no command")
    api_version = body.get("apiVersion") or ""
    if not str(api_version).startswith("client.authentication.k8s.io/"):
        raise ConfigError(
            f"user {user_name!r}: exec apiVersion {api_version!r} is not client.authentication.k8s.io/*"
        )
    env = tuple(
        (str(item.get("name")), str(item.get("value", "")))
        for item in body.get("env") or ()
        if isinstance(item, Mapping) and item.get("name")
    )
    return ExecPlugin(
        command=command,
        args=tuple(str(arg) for arg in body.get("args") or ()),
        env=env,
        api_version=str(api_version),
        install_hint=str(body.get("installHint") or ""),
        provide_cluster_info=bool(body.get("provideClusterInfo")),
    )


def _cluster_info(cluster: Mapping[str, Any], ca: Material) -> dict[str, Any]:
    """ExecCredential `spec.cluster`, for plugins that ask for it (provideClusterInfo)."""
    info: dict[str, Any] = {"server": cluster.get("server")}
    if ca.data is not None:
        info["certificate-authority-data"] = base64.b64encode(ca.data).decode()
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if key in cluster:
            info[key] = cluster[key]
    extension = next(
        (
            item.get("extension")
            for item in cluster.get("extensions") or ()
            if isinstance(item, Mapping) and item.get("name") == "client.authentication.k8s.io/exec"
        ),
        None,
    )
    if extension is not None:
        info["config"] = extension
    return info


def resolve(config: Mapping[str, Any], context: str | None = None) -> ResolvedConfig:
    """The cluster and credentials of `context` (default: the current context)."""
    name = context or config.get("current-context")
    if not name:
        raise ConfigError("no context given and the kubeconfig has no current-context")
    ctx = _named(config, "contexts", "context", name)
    if ctx is None:
        raise ConfigError(f"context {name!r} is not in the kubeconfig")
    cluster_name = ctx.get("cluster")
    cluster = _named(config, "clusters", "cluster", cluster_name) if cluster_name else None
    if cluster is None:
        raise ConfigError(f"context {name!r}: cluster {cluster_name!r} is not in the kubeconfig")
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise ConfigError(f"cluster {cluster_name!r} has no server")
    user_name = ctx.get("user")
    user = (_named(config, "users", "user", user_name) if user_name else None) or {}
    if user.get("auth-provider"):
        provider = (user["auth-provider"] or {}).get("name", "")
        raise ConfigError(
            f"user {user_name!r}: auth-provider {provider!r} was removed from Kubernetes clients; "
            "use its exec credential plugin instead (e.g. gke-gcloud-auth-plugin, kubelogin)"
        )
    if user.get("username") or user.get("password"):
        raise ConfigError(
            f"user {user_name!r}: basic authentication (username/password) is not supported by the "
            "API server since Kubernetes 1.19; use a token, a client certificate or an exec plugin"
        )
    ca = _material(cluster, "certificate-authority", f"cluster {cluster_name!r}")
    token_file = user.get("tokenFile")
    exec_body = user.get("exec")
    return ResolvedConfig(
        server=server.rstrip("/"),
        certificate_authority=ca,
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name") or None,
        client_certificate=_material(user, "client-certificate", f"user {user_name!r}"),
        client_key=_material(user, "client-key", f"user {user_name!r}"),
        token=str(user["token"]) if user.get("token") else None,
        token_file=Path(token_file) if token_file else None,
        exec_plugin=_exec_plugin(exec_body, str(user_name)) if isinstance(exec_body, Mapping) else None,
        cluster_info=_cluster_info(cluster, ca),
        namespace=_context_namespace(ctx),
        proxy_url=str(cluster["proxy-url"]) if cluster.get("proxy-url") else None,
    )


def _context_namespace(ctx: Mapping[str, Any]) -> str | None:
    value = ctx.get("namespace")
    return value if isinstance(value, str) and value else None
