"""Read a kubeconfig (or the in-cluster service account) into what the client needs: the server, TLS
material and one way to authenticate.

The common cases are read here directly: a bearer token (inline or ``tokenFile``), a client
certificate and key (files or inline data), basic auth, a CA (file or data),
``insecure-skip-tls-verify`` and ``tls-server-name``. Whatever needs code to run (``exec`` plugins,
``auth-provider``), a proxy, or a ``$KUBECONFIG`` list of several files is left to
kubernetes_asyncio's loader (``needs_full_loader``): importing that package costs ~37 MiB of resident
memory and ~0.5 s (its thousand generated model modules), which a controller using a service-account
token or a static kubeconfig should not pay (bench/bench_import_cost.py).
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "IN_CLUSTER_CA_FILE",
    "IN_CLUSTER_TOKEN_FILE",
    "ClusterSettings",
    "FileOrData",
    "KubeconfigError",
    "TokenFileAuth",
    "in_cluster_host",
    "kubeconfig_paths",
    "needs_full_loader",
    "settings_from_kubeconfig",
]

IN_CLUSTER_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
IN_CLUSTER_CA_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
#: client-go re-reads a token file at most once a minute (a projected token rotates hourly)
TOKEN_FILE_REREAD_SECONDS = 60.0


class KubeconfigError(ValueError):
    """The kubeconfig names something that is not there (a context, cluster or user)."""


@dataclass(frozen=True)
class FileOrData:
    """A kubeconfig value given either as a file path or inline (base64) data."""

    path: Path | None = None
    data: bytes | None = None


@dataclass(frozen=True)
class ClusterSettings:
    host: str
    ca: FileOrData | None = None
    client_certificate: FileOrData | None = None
    client_key: FileOrData | None = None
    verify_tls: bool = True
    tls_server_name: str | None = None
    #: a bearer token given inline
    token: str | None = None
    #: a file holding the bearer token (re-read: it may be rotated)
    token_file: Path | None = None
    #: "username:password" for basic auth
    basic_auth: str | None = None


def kubeconfig_paths(explicit: str | Path | None, environ: Mapping[str, str]) -> list[Path]:
    """The kubeconfig file(s) to read: the explicit one, else ``$KUBECONFIG`` (a ``:``-separated
    list), else ``~/.kube/config``."""
    if explicit is not None:
        return [Path(explicit).expanduser()]
    listed = [part for part in environ.get("KUBECONFIG", "").split(os.pathsep) if part]
    if listed:
        return [Path(part).expanduser() for part in listed]
    return [Path("~/.kube/config").expanduser()]


def _named(entries: Any, name: str, what: str) -> dict[str, Any]:
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(what)
            return body if isinstance(body, dict) else {}
    raise KubeconfigError(f"kubeconfig has no {what} named {name!r}")


def _selected(config: Mapping[str, Any], context: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    name = context or config.get("current-context")
    if not name:
        raise KubeconfigError("kubeconfig has no current-context and none was given")
    chosen = _named(config.get("contexts"), str(name), "context")
    cluster = _named(config.get("clusters"), str(chosen.get("cluster") or ""), "cluster")
    user_name = chosen.get("user")
    user = _named(config.get("users"), str(user_name), "user") if user_name else {}
    return cluster, user


def needs_full_loader(config: Mapping[str, Any], context: str | None) -> bool:
    """True when the selected context needs what only the full loader does: running a credential
    plugin (``exec``, ``auth-provider``) or a proxy."""
    cluster, user = _selected(config, context)
    return bool(user.get("exec") or user.get("auth-provider") or cluster.get("proxy-url"))


def _file_or_data(section: Mapping[str, Any], key: str, base: Path) -> FileOrData | None:
    data = section.get(f"{key}-data")
    if data:
        return FileOrData(data=base64.b64decode(data))
    path = section.get(key)
    if path:
        resolved = Path(str(path)).expanduser()
        return FileOrData(path=resolved if resolved.is_absolute() else base / resolved)
    return None


def settings_from_kubeconfig(config: Mapping[str, Any], context: str | None, base: Path) -> ClusterSettings:
    """The settings of the selected context (relative file paths are relative to ``base``, the
    kubeconfig's directory). Call only when ``needs_full_loader`` is False."""
    cluster, user = _selected(config, context)
    server = cluster.get("server")
    if not server:
        raise KubeconfigError("the kubeconfig's cluster has no server")
    token_file = user.get("tokenFile")
    username, password = user.get("username"), user.get("password")
    return ClusterSettings(
        host=str(server).rstrip("/"),
        ca=_file_or_data(cluster, "certificate-authority", base),
        client_certificate=_file_or_data(user, "client-certificate", base),
        client_key=_file_or_data(user, "client-key", base),
        verify_tls=not cluster.get("insecure-skip-tls-verify", False),
        tls_server_name=cluster.get("tls-server-name") or None,
        token=str(user["token"]) if user.get("token") else None,
        token_file=(base / Path(str(token_file)).expanduser())
        if token_file and not user.get("token")
        else None,
        basic_auth=f"{username}:{password}" if username and password else None,
    )


def in_cluster_host(environ: Mapping[str, str]) -> str:
    """The API server's address inside a pod (IPv6 addresses bracketed)."""
    host = environ["KUBERNETES_SERVICE_HOST"]
    port = environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:
        host = f"[{host}]"
    return f"https://{host}:{port}"


class TokenFileAuth:
    """A bearer token (inline, or read from a file that may be rotated), or basic auth."""

    def __init__(
        self,
        *,
        token: str | None = None,
        token_file: Path | None = None,
        basic_auth: str | None = None,
        reread_seconds: float = TOKEN_FILE_REREAD_SECONDS,
    ) -> None:
        self._token = token
        self._token_file = token_file
        self._basic = base64.b64encode(basic_auth.encode()).decode() if basic_auth else None
        self._reread_seconds = reread_seconds
        self._read_at: float | None = None

    def _file_token(self, force: bool = False) -> str | None:
        assert self._token_file is not None
        now = time.monotonic()
        if force or self._read_at is None or now - self._read_at >= self._reread_seconds:
            self._token = self._token_file.read_text().strip() or None
            self._read_at = now
        return self._token

    async def headers(self) -> dict[str, str]:
        token = self._file_token() if self._token_file is not None else self._token
        if token:
            return {"Authorization": f"Bearer {token}"}
        if self._basic:
            return {"Authorization": f"Basic {self._basic}"}
        return {}

    async def refresh(self) -> bool:
        """After a 401: a token file may have been rotated since we last read it."""
        if self._token_file is None:
            return False
        before = self._token
        return self._file_token(force=True) != before
