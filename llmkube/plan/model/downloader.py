"""The model downloader container: what the inference pods' `model-downloader` init container and a
Model's prefetch Job run (the same script, the same environment, the same place in the cache).

The container gets the Model's `sourceSecretRef` as environment (`envFrom`): HF_TOKEN, AWS_* go
to this container only, never to the inference container. The variables we set ourselves are
listed under `env`, which Kubernetes lets win over `envFrom`, so no key of the Secret can change
what is fetched or where it goes. Behind a company proxy it gets the controller's HTTPS_PROXY,
HTTP_PROXY and NO_PROXY (both spellings: curl reads only the lower-case `http_proxy`), the
cluster's own addresses added to NO_PROXY.
"""

from dataclasses import dataclass

from llmkube.api.base import KubeObject
from llmkube.apimachinery.proxy import DIRECT, ProxyConfig
from llmkube.plan.model.download_scripts import downloader_script
from llmkube.plan.model.remote import RemoteSource
from llmkube.plan.model.source import SourceKind

NAME = "model-downloader"
MODELS_MOUNT = "/models"  # where the model volume sits in the downloader and the inference container
CA_MOUNT = "/custom-certs"
CA_VOLUME = "custom-ca-cert"
#: spec.webIdentity: the projected ServiceAccount token the downloader exchanges with STS
IDENTITY_VOLUME = "web-identity-token"
IDENTITY_MOUNT = "/var/run/secrets/llmkube.dev/web-identity"
IDENTITY_TOKEN_FILE = f"{IDENTITY_MOUNT}/token"
#: the kubelet renews a projected token at 80% of its life: the downloader reads it at each exchange
IDENTITY_TOKEN_SECONDS = 3600
#: It asks for little and is capped: curl streams to disk.
RESOURCES: KubeObject = {
    "requests": {"cpu": "100m", "memory": "64Mi"},
    "limits": {"memory": "512Mi"},
}
_KIND_NAMES = {SourceKind.HTTP: "http", SourceKind.HF: "hf", SourceKind.S3: "s3", SourceKind.GS: "gs"}


@dataclass(frozen=True)
class DownloadTarget:
    """What one download stages, and where."""

    remote: RemoteSource
    source: str  # spec.source, for the log lines
    cache_dir: str  # the Model's directory: /models/<cacheKey> (or /models in an emptyDir)
    sha256: str | None  # spec.sha256: the model file's
    on_change: bool  # refreshPolicy OnChange
    hf_endpoint: str
    #: the proxies the downloader goes through (HTTPS_PROXY, NO_PROXY... as curl reads them)
    proxy: ProxyConfig = DIRECT


def model_files_value(remote: RemoteSource) -> str:
    """MODEL_FILES: `<path below the Model's directory><TAB><URL or S3 path>`, the model file first.
    Neither part can hold a tab or a newline (plan/model/fileset.py, URLs are quoted)."""
    return "\n".join(f"{file.dest}\t{file.location}" for file in remote.files)


def download_env(target: DownloadTarget) -> list[KubeObject]:
    env: list[KubeObject] = [
        {"name": "DOWNLOAD_KIND", "value": _KIND_NAMES[target.remote.kind]},
        {"name": "MODEL_SOURCE", "value": target.source},
        {"name": "CACHE_DIR", "value": target.cache_dir},
        {"name": "MODEL_FILES", "value": model_files_value(target.remote)},
    ]
    if target.sha256:
        env.append({"name": "MODEL_SHA256", "value": target.sha256.lower()})
    if target.on_change:
        env.append({"name": "ON_CHANGE", "value": "1"})
    if target.remote.kind is SourceKind.HF:
        # What the Hub's own tools read: the URLs above already point there.
        env.append({"name": "HF_ENDPOINT", "value": target.hf_endpoint})
    if target.remote.identity is not None:
        env += [
            {"name": "AWS_ROLE_ARN", "value": target.remote.identity.role_arn},
            {"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": IDENTITY_TOKEN_FILE},
        ]
    # Under `env`, so a Secret's keys cannot send the download through a proxy of its own.
    env.extend({"name": name, "value": value} for name, value in target.proxy.environment().items())
    return env


def secret_env_from(remote: RemoteSource) -> list[KubeObject]:
    return [{"secretRef": {"name": remote.secret}}] if remote.secret else []


def downloader_container(
    *,
    image: str,
    env: list[KubeObject],
    env_from: list[KubeObject],
    mounts: list[KubeObject],
    security_context: KubeObject,
    local_source: bool = False,
    custom_ca: bool = False,
    name: str = NAME,
) -> KubeObject:
    container: KubeObject = {
        "name": name,
        "image": image,
        "command": ["sh", "-c", downloader_script(local_source=local_source, custom_ca=custom_ca)],
        "env": env,
    }
    if env_from:
        container["envFrom"] = env_from
    container.update(
        {
            "volumeMounts": mounts,
            "securityContext": security_context,
            "resources": RESOURCES,
            # Its last line (or curl's error) becomes the container's status message.
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }
    )
    return container


def identity_volume(remote: RemoteSource) -> list[KubeObject]:
    """spec.webIdentity: the pod's ServiceAccount token for the audience, projected (none without)."""
    if remote.identity is None:
        return []
    token = {
        "audience": remote.identity.audience,
        "expirationSeconds": IDENTITY_TOKEN_SECONDS,
        "path": "token",
    }
    return [{"name": IDENTITY_VOLUME, "projected": {"sources": [{"serviceAccountToken": token}]}}]


def identity_mount(remote: RemoteSource) -> list[KubeObject]:
    if remote.identity is None:
        return []
    return [{"name": IDENTITY_VOLUME, "mountPath": IDENTITY_MOUNT, "readOnly": True}]


def ca_volume(configmap: str) -> KubeObject:
    return {"name": CA_VOLUME, "configMap": {"name": configmap}}


def ca_mount() -> KubeObject:
    return {"name": CA_VOLUME, "mountPath": CA_MOUNT, "readOnly": True}
