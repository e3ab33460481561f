"""Where the model files live inside the pod.

Storage is only planned for runtimes that read a local model file (llama.cpp, vLLM) and only when
`skipModelInit` is not true. Exactly one mode applies, in this order:
  pvc:// source  -> the claim mounted read-only, no init container, no cache PVC;
  cached mode    -> the namespace cache PVC, filled by the `model-downloader` init container;
  otherwise      -> an emptyDir, filled by the same init container on every pod start.
`--model-storage=ephemeral` puts downloaded (remote) sources in that last mode, with the emptyDir
bounded by `--ephemeral-cache-size-limit`: no claim, so replicas start on any node, at the price of
a download per pod start. A model known to be larger than the limit is refused (the kubelet would
evict the pod over and over). Local-path sources keep the namespace cache, which their copy needs.
`--model-storage=per-service` puts remote sources in cached mode on the service's own claim
(service_cache.py) instead of the namespace's: the same layout, another claim.

A service's own `modelCache` (v0.9) overrides the operator's choice for it: `claimName` caches in
that existing claim of its namespace (the same layout; llmkube never creates or changes it), and
`persistence: Ephemeral` downloads into an emptyDir, bounded by `resources.ephemeralStorage` when
set (else by `--ephemeral-cache-size-limit`).
The init container is the model downloader (plan/model/downloader.py): the same container a
Model's prefetch Job runs, so a prefetched Model is a cache hit here.
"""

import posixpath
from dataclasses import dataclass, replace
from typing import Literal

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.apimachinery.quantity import QuantityError, canonical_quantity, parse_quantity
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.names import CACHE_PVC_NAME
from llmkube.plan.inferenceservice.objects import compact
from llmkube.plan.inferenceservice.service_cache import service_cache_claim_name
from llmkube.plan.model import downloader
from llmkube.plan.model.downloader import MODELS_MOUNT, DownloadTarget
from llmkube.plan.model.fileset import FileSetProblem, staging_plan
from llmkube.plan.model.remote import RemoteFile, RemoteSource, remote_source
from llmkube.plan.model.size import parse_size
from llmkube.plan.model.source import (
    SourceKind,
    canonical_basename,
    classify_source,
    local_path,
    parse_pvc_source,
)

StorageMode = Literal["none", "pvc", "cache", "service", "claim", "emptydir"]

PVC_SOURCE_MOUNT = "/model-source"
HOST_MODEL_FILE = "/host-model/model.gguf"
CA_MOUNT = downloader.CA_MOUNT
INIT_CONTAINER_NAME = downloader.NAME


@dataclass(frozen=True)
class ModelStorage:
    mode: StorageMode
    model_path: str = ""  # what the runtime is told to load; "" for no local file
    volumes: tuple[KubeObject, ...] = ()
    init_containers: tuple[KubeObject, ...] = ()
    mounts: tuple[KubeObject, ...] = ()  # the main container's volume mounts
    mmproj_path: str = ""  # the multimodal projector beside it (spec.mmproj); "" for none
    #: the directory the Model's files are staged in, as the main container sees it ("" for none)
    files_root: str = ""

    @property
    def uses_cache_pvc(self) -> bool:
        """The namespace's shared claim."""
        return self.mode == "cache"

    @property
    def uses_service_cache(self) -> bool:
        """The service's own claim (service_cache.py)."""
        return self.mode == "service"


NO_STORAGE = ModelStorage(mode="none")


@dataclass(frozen=True)
class StorageProblem:
    field: str
    message: str


def _pvc_storage(model: Model) -> ModelStorage | StorageProblem:
    source = model.spec.source
    pvc = parse_pvc_source(source)
    if pvc is None:
        return StorageProblem(
            "model.spec.source", f'invalid PVC source "{source}": want pvc://<claim>/<path>'
        )
    plan = staging_plan(model.spec)
    if isinstance(plan, FileSetProblem):
        return StorageProblem(f"model.{plan.field}", plan.message)
    # With files listed, the path is the directory they are in (a split GGUF's shards side by side).
    base = posixpath.join(PVC_SOURCE_MOUNT, pvc.path)
    return ModelStorage(
        mode="pvc",
        model_path=posixpath.join(base, plan.primary) if plan else base,
        files_root=base,
        mmproj_path=posixpath.join(base, plan.mmproj) if plan and plan.mmproj else "",
        volumes=(
            {"name": "model-source", "persistentVolumeClaim": {"claimName": pvc.claim, "readOnly": True}},
        ),
        mounts=({"name": "model-source", "mountPath": PVC_SOURCE_MOUNT, "readOnly": True},),
    )


def _single_file(remote: RemoteSource, dest: str) -> RemoteSource:
    """A one-file source stored under `dest` (the name an earlier status gave it, or the
    emptyDir's)."""
    return replace(remote, files=(RemoteFile(dest, remote.primary.location),))


def plan_storage(
    *,
    namespace: str,
    spec: InferenceServiceSpec,
    model: Model,
    config: OperatorConfig,
    needs_model_init: bool,
    service: str = "",
) -> ModelStorage | StorageProblem:
    """`service` names the InferenceService (its claim in per-service mode)."""
    if not needs_model_init or spec.skip_model_init:
        return NO_STORAGE
    source = model.spec.source
    kind = classify_source(source)
    if kind is SourceKind.PVC:
        return _pvc_storage(model)
    status = model.status
    key = status.cache_key if status and status.cache_key else ""
    chosen = spec.model_cache
    user_claim = chosen.claim_name if chosen and chosen.claim_name else ""
    asked_ephemeral = bool(chosen and chosen.persistence == "Ephemeral")
    ephemeral = (
        asked_ephemeral or (config.model_storage == "ephemeral" and not user_claim)
    ) and kind is not SourceKind.LOCAL
    cached = bool(key) and bool(config.model_cache_path) and not ephemeral
    own_claim = (
        cached and config.model_storage == "per-service" and kind is not SourceKind.LOCAL and not user_claim
    )
    limit = (
        spec.resources.ephemeral_storage
        if asked_ephemeral and spec.resources and spec.resources.ephemeral_storage
        else config.ephemeral_cache_size_limit
    )
    if ephemeral:
        try:
            parse_quantity(limit)
        except QuantityError:
            return StorageProblem("spec.resources.ephemeralStorage", f'invalid quantity "{limit}"')
        if too_large := _over_ephemeral_limit(model, limit):
            return too_large
    if kind is SourceKind.LOCAL and not cached:
        return StorageProblem(
            "model.spec.source",
            f'local source "{source}" needs the model cache (--model-cache-path is empty)',
        )
    remote = remote_source(model, config.hf_endpoint)
    if isinstance(remote, FileSetProblem):
        return StorageProblem(f"model.{remote.field}", remote.message)
    if remote is None and kind is not SourceKind.LOCAL:
        # A repository the runtime resolves: the downloader is told to fetch it as it is (and
        # says it cannot), as the reference does; the advice says to skip it (advice.py).
        remote = RemoteSource(SourceKind.HTTP, (RemoteFile("model.gguf", source),))
    if cached:
        cache_dir = posixpath.join(MODELS_MOUNT, key)
        path = status.path if status and status.path else ""
        # The downloader names a one-file download before any header is known, so its file name
        # never depends on metadata the Model controller reads later (reference: Model name).
        gguf_name = status.gguf.model_name if status and status.gguf and kind is SourceKind.LOCAL else None
        single = posixpath.basename(path) or canonical_basename(model.metadata.name or "", gguf_name)
        volume_name = "model-cache"
        claim = user_claim or (service_cache_claim_name(service) if own_claim else CACHE_PVC_NAME)
        volumes: list[KubeObject] = [{"name": volume_name, "persistentVolumeClaim": {"claimName": claim}}]
    else:
        cache_dir = MODELS_MOUNT
        single = f"{namespace}-{model.metadata.name or 'model'}.gguf"
        volume_name = "model-storage"
        empty_dir = {"sizeLimit": canonical_quantity(limit)} if ephemeral else {}
        volumes = [{"name": volume_name, "emptyDir": empty_dir}]
    init_mounts: list[KubeObject] = [{"name": volume_name, "mountPath": MODELS_MOUNT}]
    if config.ca_cert_configmap:
        volumes.append(downloader.ca_volume(config.ca_cert_configmap))
        init_mounts.append(downloader.ca_mount())
    if remote is None:  # a local file, copied into the cache from the node
        model_path = posixpath.join(cache_dir, single)
        volumes.insert(1, {"name": "host-model", "hostPath": {"path": local_path(source), "type": "File"}})
        init_mounts.insert(1, {"name": "host-model", "mountPath": HOST_MODEL_FILE, "readOnly": True})
        env: list[KubeObject] = [
            {"name": "MODEL_SOURCE", "value": source},
            {"name": "CACHE_DIR", "value": cache_dir},
            {"name": "MODEL_PATH", "value": model_path},
        ]
        env_from: list[KubeObject] = []
        mmproj_path = ""
    else:
        if not remote.staged:
            remote = _single_file(remote, single)
        target = DownloadTarget(
            remote=remote,
            source=source,
            cache_dir=cache_dir,
            sha256=model.spec.sha256,
            on_change=model.spec.refresh_policy == "OnChange",
            hf_endpoint=config.hf_endpoint,
            proxy=config.download_proxy,
        )
        model_path = posixpath.join(cache_dir, remote.primary.dest)
        mmproj_path = posixpath.join(cache_dir, remote.mmproj) if remote.mmproj else ""
        env, env_from = downloader.download_env(target), downloader.secret_env_from(remote)
        volumes += downloader.identity_volume(remote)
        init_mounts += downloader.identity_mount(remote)
    init_container = downloader.downloader_container(
        image=config.init_container_image,
        env=env,
        env_from=env_from,
        mounts=init_mounts,
        security_context=init_security_context(spec),
        local_source=remote is None,
        custom_ca=bool(config.ca_cert_configmap),
    )
    return ModelStorage(
        mode=("claim" if user_claim else "service" if own_claim else "cache") if cached else "emptydir",
        model_path=model_path,
        mmproj_path=mmproj_path,
        files_root=cache_dir,
        volumes=tuple(volumes),
        init_containers=(init_container,),
        mounts=({"name": volume_name, "mountPath": MODELS_MOUNT, "readOnly": True},),
    )


def _over_ephemeral_limit(model: Model, limit: str) -> StorageProblem | None:
    """A model whose size the Model controller measured (status.size) above the emptyDir's limit
    (`limit`: the service's resources.ephemeralStorage, else --ephemeral-cache-size-limit)."""
    size = parse_size(model.status.size if model.status else None)
    if size is None:
        return None  # not measured yet: the kubelet's limit still bounds the pod
    if size <= parse_quantity(limit).value:
        return None
    return StorageProblem(
        "model.status.size",
        f"the model is {model.status.size if model.status else size}, more than the ephemeral "
        f"cache holds ({limit}: spec.resources.ephemeralStorage, else --ephemeral-cache-size-limit): "
        "raise the limit or use a cache (spec.modelCache, --model-storage)",
    )


def init_security_context(spec: InferenceServiceSpec) -> KubeObject:
    """Least privilege, but the same user and group as the pod so the files it writes are readable.
    Non-root unless the pod asks for root (its user 0, or runAsNonRoot false): the downloader image
    runs as an unprivileged user of its own otherwise."""
    pod = spec.pod_security_context or {}
    root = pod.get("runAsUser") == 0 or pod.get("runAsNonRoot") is False
    return compact(
        {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,  # it writes only under /models
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": None if root else True,
            "runAsUser": pod.get("runAsUser"),
            "runAsGroup": pod.get("runAsGroup"),
        }
    )
