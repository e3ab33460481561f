"""Where the API server is and how to authenticate: the in-cluster service account, or a kubeconfig
(token, token file, client certificate or exec plugin), handed to our own aiohttp transport.

The kubeconfig rules are in `llmkube.kube.rest.kubeconfig` (pure); this module reads the files, builds
the TLS context and provides the credentials, re-reading a token file (a rotated service-account
token) and re-running an exec plugin when its token expires or the server answers 401.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from llmkube.apimachinery.proxy import ProxyConfig, ProxyURLError
from llmkube.kube.rest.exec_credential import ExecAuth, ExecCredential, run_exec_plugin
from llmkube.kube.rest.kubeconfig import ConfigError, Material, ResolvedConfig, merge_kubeconfigs, resolve

__all__ = [
    "AuthProvider",
    "ClientConfig",
    "ConfigError",
    "StaticAuth",
    "TokenFileAuth",
    "in_cluster",
    "kubeconfig_paths",
    "load_client_config",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: how long a token read from a file is used before the file is read again (client-go: 1 minute)
TOKEN_FILE_REREAD_SECONDS = 60.0


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


class TokenFileAuth:
    """A bearer token read from a file and read again every minute or after a 401: projected
    service-account tokens are rotated by the kubelet while the process runs."""

    def __init__(self, path: Path, reread_after: float = TOKEN_FILE_REREAD_SECONDS) -> None:
        self._path = path
        self._reread_after = reread_after
        self._token = ""
        self._read_at: float | None = None

    def _read(self) -> str:
        if self._read_at is None or time.monotonic() - self._read_at >= self._reread_after:
            try:
                self._token = self._path.read_text().strip()
            except OSError as error:
                if self._read_at is None:
                    raise ConfigError(f"cannot read the token file {self._path}: {error}") from None
                # Keep the last token: a file being replaced is briefly missing.
            self._read_at = time.monotonic()
        return self._token

    async def headers(self) -> dict[str, str]:
        token = self._read()
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def refresh(self) -> bool:
        before = self._token
        self._read_at = None
        return self._read() != before


@dataclass
class ClientConfig:
    host: str
    auth: AuthProvider
    ssl_context: ssl.SSLContext | None = None
    tls_server_name: str | None = None
    #: the namespace the kubeconfig context names (or the pod's own, in-cluster); None if neither
    namespace: str | None = None
    #: the proxies of the requests: the kubeconfig's `proxy-url`, else HTTPS_PROXY/NO_PROXY
    proxy: ProxyConfig = field(default_factory=ProxyConfig)


def in_cluster(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (service_account_dir / "token").exists()


def in_cluster_config(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> ResolvedConfig:
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise ConfigError("KUBERNETES_SERVICE_HOST is not set: not running in a pod")
    netloc = f"[{host}]" if ":" in host else host  # an IPv6 address
    return ResolvedConfig(
        server=f"https://{netloc}:{port}",
        certificate_authority=Material(path=service_account_dir / "ca.crt"),
        token_file=service_account_dir / "token",
        namespace=_pod_namespace(service_account_dir),
    )


def _pod_namespace(service_account_dir: Path) -> str | None:
    """The namespace of the pod we run in (a small file the kubelet mounts next to the token)."""
    try:
        return (service_account_dir / "namespace").read_text().strip() or None
    except OSError:
        return None


def kubeconfig_paths(explicit: str | Path | None = None) -> list[Path]:
    """The files to merge, in order: the one given, else `$KUBECONFIG` (a list, missing files
    skipped), else ~/.kube/config."""
    if explicit is not None:
        return [Path(explicit)]
    listed = [Path(item) for item in os.environ.get("KUBECONFIG", "").split(os.pathsep) if item]
    if listed:
        return [path for path in listed if path.exists()]
    return [Path.home() / ".kube" / "config"]


def read_kubeconfigs(paths: list[Path]) -> dict[str, object]:
    import yaml  # only kubeconfig files are YAML: a controller configured in-cluster never loads it

    if not paths:
        raise ConfigError("no kubeconfig found (none of the files in $KUBECONFIG exists)")
    documents = []
    for path in paths:
        try:
            documents.append((path, yaml.safe_load(path.read_text())))
        except OSError as error:
            raise ConfigError(f"cannot read the kubeconfig {path}: {error.strerror or error}") from None
        except yaml.YAMLError as error:
            raise ConfigError(f"the kubeconfig {path} is not valid YAML: {error}") from None
    return merge_kubeconfigs(documents)


def _pem(material: Material) -> bytes | None:
    if material.data is not None:
        return material.data
    if material.path is not None:
        try:
            return material.path.read_bytes()
        except OSError as error:
            raise ConfigError(f"cannot read {material.path}: {error.strerror or error}") from None
    return None


def _load_client_certificate(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl only loads a certificate chain from files: write them to a private temporary directory
    # for the moment of loading.
    with tempfile.TemporaryDirectory(prefix="llmkube-tls-") as directory:
        cert_path, key_path = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert_path.write_bytes(cert)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as error:
            raise ConfigError(f"the client certificate or key cannot be used: {error}") from None


def ssl_context(resolved: ResolvedConfig, credential: ExecCredential | None = None) -> ssl.SSLContext | None:
    if not resolved.server.startswith("https"):
        return None
    # With a cluster CA, only that CA is trusted (as client-go does); without one, the system's.
    ca = None if resolved.insecure_skip_tls_verify else _pem(resolved.certificate_authority)
    try:
        context = ssl.create_default_context(cadata=ca.decode(errors="replace") if ca is not None else None)
    except ssl.SSLError as error:
        raise ConfigError(f"the certificate authority cannot be used: {error}") from None
    if resolved.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = credential.client_certificate_pem if credential else None
    key = credential.client_key_pem if credential else None
    if cert is None:
        cert, key = _pem(resolved.client_certificate), _pem(resolved.client_key)
    if cert is not None or key is not None:
        if cert is None or key is None:
            raise ConfigError("a client certificate needs both the certificate and its key")
        _load_client_certificate(context, cert, key)
    return context


def proxy_config(resolved: ResolvedConfig, environ: Mapping[str, str] | None = None) -> ProxyConfig:
    """kubectl's rule: the cluster's `proxy-url` when it has one (every request, loopback
    included), else the environment's HTTPS_PROXY / HTTP_PROXY / NO_PROXY (loopback never). In a
    pod, the API server's Service address is never proxied (a proxy outside the cluster cannot
    reach it; client-go leaves that to NO_PROXY, which is easy to forget)."""
    environ = os.environ if environ is None else environ
    try:
        if resolved.proxy_url:
            return ProxyConfig.through(resolved.proxy_url)
        proxy = ProxyConfig.from_environ(environ)
    except ProxyURLError as error:
        where = "the cluster's proxy-url" if resolved.proxy_url else "HTTPS_PROXY/HTTP_PROXY"
        raise ConfigError(f"{where}: {error}") from None
    service_host = environ.get("KUBERNETES_SERVICE_HOST", "")
    return proxy.bypassing([service_host]) if proxy.enabled and service_host else proxy


async def client_config(resolved: ResolvedConfig) -> ClientConfig:
    auth: AuthProvider
    credential = None
    if resolved.token_file is not None:
        auth = TokenFileAuth(resolved.token_file)
        await auth.headers()  # an unreadable file is a configuration error now, not a 401 later
    elif resolved.token is not None:
        auth = StaticAuth({"Authorization": f"Bearer {resolved.token}"})
    elif resolved.exec_plugin is not None:
        # Run once now: a broken plugin fails the start with its message, and a plugin that
        # returns a client certificate has it in the TLS context from the first request.
        credential = await run_exec_plugin(resolved.exec_plugin, dict(resolved.cluster_info))
        auth = ExecAuth(resolved.exec_plugin, dict(resolved.cluster_info), credential)
    else:
        auth = StaticAuth()
    return ClientConfig(
        host=resolved.server,
        auth=auth,
        ssl_context=ssl_context(resolved, credential),
        tls_server_name=resolved.tls_server_name,
        namespace=resolved.namespace,
        proxy=proxy_config(resolved),
    )


async def load_client_config(
    kubeconfig: str | Path | None = None, context: str | None = None
) -> ClientConfig:
    """An explicit kubeconfig wins; otherwise the in-cluster service account when running in a pod;
    otherwise ``$KUBECONFIG`` / ``~/.kube/config``. Raises ConfigError with the reason."""
    if kubeconfig is None and context is None and in_cluster():
        return await client_config(in_cluster_config())
    return await client_config(resolve(read_kubeconfigs(kubeconfig_paths(kubeconfig)), context))
