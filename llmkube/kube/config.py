"""Where the API server is and how to authenticate: loaded through kubernetes_asyncio's config
loaders (in-cluster service account, or kubeconfig with token, client certificate or exec plugin),
then handed to our own aiohttp transport.  kubernetes_asyncio is used for nothing else."""

from __future__ import annotations

import contextlib
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config import incluster_config, kube_config

__all__ = ["AuthProvider", "ClientConfig", "ConfigurationAuth", "StaticAuth", "load_client_config"]


_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


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
    #: the namespace the kubeconfig context names (or the pod's own, in-cluster); None if neither
    namespace: str | None = None


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


def in_cluster() -> bool:
    token = Path(incluster_config.SERVICE_TOKEN_FILENAME)
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and token.exists()


def _pod_namespace() -> str | None:
    """The namespace of the pod we run in (a tiny file the kubelet mounts; read once)."""
    with contextlib.suppress(OSError):
        return Path(_SERVICE_ACCOUNT_NAMESPACE).read_text().strip() or None
    return None


def _context_namespace(context: Any) -> str | None:
    """`contexts[].context.namespace` of the active context (the loader hands it as a dict)."""
    inner = context.get("context") if isinstance(context, dict) else None
    value = inner.get("namespace") if isinstance(inner, dict) else None
    return value if isinstance(value, str) and value else None


async def load_client_config(
    kubeconfig: str | Path | None = None, context: str | None = None
) -> ClientConfig:
    """An explicit kubeconfig wins; otherwise the in-cluster service account when running in a pod;
    otherwise ``$KUBECONFIG`` / ``~/.kube/config``."""
    configuration = Configuration()
    loader: Any | None = None
    namespace: str | None = None
    if kubeconfig is None and context is None and in_cluster():
        incluster_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        namespace = _pod_namespace()
    else:
        loader = await kube_config.load_kube_config(
            config_file=str(kubeconfig) if kubeconfig is not None else None,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
        namespace = _context_namespace(loader.current_context)
    return ClientConfig(
        host=str(configuration.host).rstrip("/"),
        auth=ConfigurationAuth(configuration, loader),
        ssl_context=_ssl_context(configuration),
        tls_server_name=configuration.tls_server_name,
        namespace=namespace,
    )
