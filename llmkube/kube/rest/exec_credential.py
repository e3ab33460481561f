"""Exec credential plugins (`users[].user.exec`): run the command, read the ExecCredential it prints.

The protocol is client-go's (client.authentication.k8s.io v1 and v1beta1): the plugin gets the
request in `$KUBERNETES_EXEC_INFO` (never interactive: a controller has no terminal) and prints an
ExecCredential whose status holds a bearer token and/or a client certificate, with an optional
expiry. The token is reused until it expires or the API server answers 401.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from llmkube.kube.rest.kubeconfig import ConfigError, ExecPlugin

__all__ = ["ExecAuth", "ExecCredential", "exec_environment", "parse_exec_credential", "run_exec_plugin"]

#: a plugin that takes longer than this is reported as failed rather than hanging the start
EXEC_TIMEOUT_SECONDS = 120.0
#: refresh this long before the stated expiry, so a request never leaves with a dying token
_EXPIRY_MARGIN = timedelta(seconds=10)


@dataclass(frozen=True)
class ExecCredential:
    token: str | None = None
    client_certificate_pem: bytes | None = None
    client_key_pem: bytes | None = None
    expires: datetime | None = None

    def expired(self, now: datetime) -> bool:
        return self.expires is not None and now >= self.expires - _EXPIRY_MARGIN


def exec_environment(
    plugin: ExecPlugin, cluster_info: dict[str, Any], base: dict[str, str]
) -> dict[str, str]:
    """The plugin's environment: ours, its `env` entries, and the request in KUBERNETES_EXEC_INFO."""
    spec: dict[str, Any] = {"interactive": False}
    if plugin.provide_cluster_info:
        spec["cluster"] = cluster_info
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec}
    return {**base, **dict(plugin.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}


def _timestamp(value: object) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"exec plugin: expirationTimestamp {value!r} is not RFC 3339") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_exec_credential(output: bytes, plugin: ExecPlugin) -> ExecCredential:
    """The plugin's standard output -> its credential; ConfigError when it is not a usable one."""
    try:
        document = json.loads(output)
    except ValueError as error:
        raise ConfigError(f"exec plugin {plugin.command!r} printed no JSON ExecCredential: {error}") from None
    if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
        raise ConfigError(f"exec plugin {plugin.command!r} printed no ExecCredential")
    if document.get("apiVersion") != plugin.api_version:
        raise ConfigError(
            f"exec plugin {plugin.command!r} answered {document.get('apiVersion')!r}, "
            f"the kubeconfig asks for {plugin.api_version!r}"
        )
    status = document.get("status") or {}
    token = status.get("token") or None
    cert = status.get("clientCertificateData") or None
    key = status.get("clientKeyData") or None
    if bool(cert) != bool(key):
        raise ConfigError(
            f"exec plugin {plugin.command!r}: clientCertificateData and clientKeyData go together"
        )
    if token is None and cert is None:
        raise ConfigError(f"exec plugin {plugin.command!r} returned neither a token nor a client certificate")
    return ExecCredential(
        token=str(token) if token else None,
        client_certificate_pem=str(cert).encode() if cert else None,
        client_key_pem=str(key).encode() if key else None,
        expires=_timestamp(status.get("expirationTimestamp")),
    )


async def run_exec_plugin(plugin: ExecPlugin, cluster_info: dict[str, Any]) -> ExecCredential:
    env = exec_environment(plugin, cluster_info, dict(os.environ))
    hint = f" ({plugin.install_hint.strip()})" if plugin.install_hint.strip() else ""
    try:
        process = await asyncio.create_subprocess_exec(
            plugin.command,
            *plugin.args,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as error:
        raise ConfigError(f"exec plugin {plugin.command!r} cannot be run: {error}{hint}") from None
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), EXEC_TIMEOUT_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise ConfigError(
            f"exec plugin {plugin.command!r} did not answer within {EXEC_TIMEOUT_SECONDS:.0f} s"
        ) from None
    if process.returncode != 0:
        message = stderr.decode(errors="replace").strip()[-500:]
        raise ConfigError(f"exec plugin {plugin.command!r} exited with {process.returncode}: {message}")
    return parse_exec_credential(stdout, plugin)


class ExecAuth:
    """Bearer tokens from an exec plugin, run again when the token expires or is refused (401)."""

    def __init__(
        self, plugin: ExecPlugin, cluster_info: dict[str, Any], first: ExecCredential | None = None
    ) -> None:
        self._plugin = plugin
        self._cluster_info = cluster_info
        self._credential = first
        self._lock = asyncio.Lock()

    async def _current(self) -> ExecCredential:
        async with self._lock:
            if self._credential is None or self._credential.expired(datetime.now(UTC)):
                self._credential = await run_exec_plugin(self._plugin, self._cluster_info)
            return self._credential

    async def headers(self) -> dict[str, str]:
        token = (await self._current()).token
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def refresh(self) -> bool:
        async with self._lock:
            self._credential = None
        return True
