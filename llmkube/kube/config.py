"""Where the API server is and how to authenticate, handed to our own aiohttp transport.

The in-cluster service account and kubeconfigs with a token, client certificate or basic auth are
read directly (kubeconfig.py); a kubeconfig that needs a credential plugin (``exec``,
``auth-provider``), a proxy, or several files merged goes through kubernetes_asyncio's loaders,
imported only then (they cost ~37 MiB of memory to import). kubernetes_asyncio is used for nothing
else."""

from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from llmkube.kube.kubeconfig import (
    IN_CLUSTER_CA_FILE,
    IN_CLUSTER_TOKEN_FILE,
    ClusterSettings,
    FileOrData,
    KubeconfigError,
    TokenFileAuth,
    in_cluster_host,
    kubeconfig_paths,
    needs_full_loader,
    settings_from_kubeconfig,
)

__all__ = [
    "AuthProvider",
    "ClientConfig",
    "ConfigurationAuth",
    "StaticAuth",
    "TokenFileAuth",
    "load_client_config",
]


class AuthProvider(Protocol):
    async def headers(self) -> dict[str, str]:
        """Headers to add to every request (usually ``Authorization``)."""
        ...

    async def refresh(self) -> bool:
        """Reload credentials after a 401; True when a retry is worth it."""
        ...


@dataclass
class StaticAuth:
    fixed_headers: dict[str, str] = field(default_factory=dict)

    async def headers(self) -> dict[str, str]:
        return dict(self.fixed_headers)

    async def refresh(self) -> bool:
        return False


class ConfigurationAuth:
    """Bearer/basic credentials held by a kubernetes_asyncio ``Configuration``.

    ``auth_settings()`` runs the configuration's refresh hook, which re-reads a rotated in-cluster
    service-account token; ``refresh`` re-runs the kubeconfig loader (exec plugin, token file)."""

    def __init__(self, configuration: Any, loader: Any | None = None) -> None:
        self._configuration = configuration
        self._loader = loader

    async def headers(self) -> dict[str, str]:
        settings = await self._configuration.auth_settings()
        bearer = settings.get("BearerToken")
        if bearer and bearer.get("value"):
            return {"Authorization": str(bearer["value"])}
        return {}

    async def refresh(self) -> bool:
        if self._loader is None:
            return False
        # A 401 means the plugin's token is no longer accepted even if it claims not to be expired.
        if hasattr(self._loader, "exec_plugin_expiry"):
            del self._loader.exec_plugin_expiry
        await self._loader.load_and_set(self._configuration)
        return True


@dataclass
class ClientConfig:
    host: str
    auth: AuthProvider
    ssl_context: ssl.SSLContext | None = None
    tls_server_name: str | None = None


def _ssl_context(configuration: Any) -> ssl.SSLContext | None:
    if not str(configuration.host).startswith("https"):
        return None
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _settings_ssl_context(settings: ClusterSettings) -> ssl.SSLContext | None:
    if not settings.host.startswith("https"):
        return None
    ca = settings.ca
    context = ssl.create_default_context(
        cafile=str(ca.path) if ca is not None and ca.path is not None else None,
        cadata=ca.data.decode() if ca is not None and ca.data is not None else None,
    )
    if settings.client_certificate is not None:
        with tempfile.TemporaryDirectory(prefix="llmkube-tls-") as scratch:
            # ssl loads a certificate chain from files only; they live just long enough to be read.
            certificate = _as_file(settings.client_certificate, Path(scratch) / "client.crt")
            key = _as_file(settings.client_key, Path(scratch) / "client.key") if settings.client_key else None
            context.load_cert_chain(str(certificate), keyfile=str(key) if key else None)
    if not settings.verify_tls:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _as_file(value: FileOrData, scratch: Path) -> Path:
    if value.path is not None:
        return value.path
    assert value.data is not None
    scratch.touch(mode=0o600)
    scratch.write_bytes(value.data)
    return scratch


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and Path(IN_CLUSTER_TOKEN_FILE).exists()


def _from_settings(settings: ClusterSettings) -> ClientConfig:
    return ClientConfig(
        host=settings.host,
        auth=TokenFileAuth(
            token=settings.token, token_file=settings.token_file, basic_auth=settings.basic_auth
        ),
        ssl_context=_settings_ssl_context(settings),
        tls_server_name=settings.tls_server_name,
    )


def _read_directly(kubeconfig: str | Path | None, context: str | None) -> ClusterSettings | None:
    """The settings when this kubeconfig can be read without kubernetes_asyncio, else None."""
    paths = kubeconfig_paths(kubeconfig, os.environ)
    if len(paths) != 1 or not paths[0].is_file():
        return None  # merging several files, and the error for a missing one, are the full loader's
    try:
        config = yaml.safe_load(paths[0].read_text())
        if not isinstance(config, dict) or needs_full_loader(config, context):
            return None
        return settings_from_kubeconfig(config, context, paths[0].parent)
    except (yaml.YAMLError, KubeconfigError, ValueError):
        return None  # the full loader reports it in its own words


async def load_client_config(
    kubeconfig: str | Path | None = None, context: str | None = None
) -> ClientConfig:
    """An explicit kubeconfig wins; otherwise the in-cluster service account when running in a pod;
    otherwise ``$KUBECONFIG`` / ``~/.kube/config``."""
    if kubeconfig is None and context is None and in_cluster():
        return _from_settings(
            ClusterSettings(
                host=in_cluster_host(os.environ),
                ca=FileOrData(path=Path(IN_CLUSTER_CA_FILE)),
                token_file=Path(IN_CLUSTER_TOKEN_FILE),
            )
        )
    settings = _read_directly(kubeconfig, context)
    if settings is not None:
        return _from_settings(settings)
    return await _load_with_plugins(kubeconfig, context)


async def _load_with_plugins(kubeconfig: str | Path | None, context: str | None) -> ClientConfig:
    # Imported here: only kubeconfigs that run a credential plugin (or merge files) pay for it.
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import kube_config

    configuration = Configuration()
    loader = await kube_config.load_kube_config(
        config_file=str(kubeconfig) if kubeconfig is not None else None,
        context=context,
        client_configuration=configuration,
        persist_config=False,
    )
    return ClientConfig(
        host=str(configuration.host).rstrip("/"),
        auth=ConfigurationAuth(configuration, loader),
        ssl_context=_ssl_context(configuration),
        tls_server_name=configuration.tls_server_name,
    )
