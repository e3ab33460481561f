"""Where the model file lives inside the pod.

Storage is only planned for runtimes that read a local model file (llama.cpp, vLLM) and only when
`skipModelInit` is not true. Exactly one mode applies, in this order:
  pvc:// source  -> the claim mounted read-only, no init container, no cache PVC;
  cached mode    -> the namespace cache PVC, filled by the `model-downloader` init container;
  otherwise      -> an emptyDir, filled by the same init container on every pod start.
"""

import posixpath
from dataclasses import dataclass
from typing import Literal

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.hardening import INIT_CONTAINER_RESOURCES
from llmkube.plan.inferenceservice.init_scripts import downloader_script
from llmkube.plan.inferenceservice.names import CACHE_PVC_NAME
from llmkube.plan.inferenceservice.objects import compact
from llmkube.plan.model.source import (
    SourceKind,
    canonical_basename,
    classify_source,
    local_path,
    parse_pvc_source,
)

StorageMode = Literal["none", "pvc", "cache", "emptydir"]

MODELS_MOUNT = "/models"  # where the model volume sits in both containers
PVC_SOURCE_MOUNT = "/model-source"
HOST_MODEL_FILE = "/host-model/model.gguf"
CA_MOUNT = "/custom-certs"
INIT_CONTAINER_NAME = "model-downloader"


@dataclass(frozen=True)
class ModelStorage:
    mode: StorageMode
    model_path: str = ""  # what the runtime is told to load; "" for no local file
    volumes: tuple[KubeObject, ...] = ()
    init_containers: tuple[KubeObject, ...] = ()
    mounts: tuple[KubeObject, ...] = ()  # the main container's volume mounts

    @property
    def uses_cache_pvc(self) -> bool:
        return self.mode == "cache"


NO_STORAGE = ModelStorage(mode="none")


@dataclass(frozen=True)
class StorageProblem:
    field: str
    message: str


def plan_storage(
    *,
    namespace: str,
    spec: InferenceServiceSpec,
    model: Model,
    config: OperatorConfig,
    needs_model_init: bool,
) -> ModelStorage | StorageProblem:
    if not needs_model_init or spec.skip_model_init:
        return NO_STORAGE
    source = model.spec.source
    kind = classify_source(source)
    if kind is SourceKind.PVC:
        pvc = parse_pvc_source(source)
        if pvc is None:
            return StorageProblem(
                "model.spec.source", f'invalid PVC source "{source}": want pvc://<claim>/<path>'
            )
        return ModelStorage(
            mode="pvc",
            model_path=posixpath.join(PVC_SOURCE_MOUNT, pvc.path),
            volumes=(
                {"name": "model-source", "persistentVolumeClaim": {"claimName": pvc.claim, "readOnly": True}},
            ),
            mounts=({"name": "model-source", "mountPath": PVC_SOURCE_MOUNT, "readOnly": True},),
        )
    status = model.status
    key = status.cache_key if status and status.cache_key else ""
    cached = bool(key) and bool(config.model_cache_path)
    if kind is SourceKind.LOCAL and not cached:
        return StorageProblem(
            "model.spec.source",
            f'local source "{source}" needs the model cache (--model-cache-path is empty)',
        )
    if cached:
        cache_dir = posixpath.join(MODELS_MOUNT, key)
        path = status.path if status and status.path else ""
        # The init container names an http(s) download before any header is known, so its file
        # name never depends on metadata the Model controller reads later (reference: Model name).
        gguf_name = status.gguf.model_name if status and status.gguf and kind is not SourceKind.HTTP else None
        basename = posixpath.basename(path) or canonical_basename(model.metadata.name or "", gguf_name)
        model_path = posixpath.join(cache_dir, basename)
        volume_name = "model-cache"
        volumes: list[KubeObject] = [
            {"name": volume_name, "persistentVolumeClaim": {"claimName": CACHE_PVC_NAME}}
        ]
    else:
        cache_dir = ""
        model_path = posixpath.join(MODELS_MOUNT, f"{namespace}-{model.metadata.name or 'model'}.gguf")
        volume_name = "model-storage"
        volumes = [{"name": volume_name, "emptyDir": {}}]
    init_mounts: list[KubeObject] = [{"name": volume_name, "mountPath": MODELS_MOUNT}]
    if kind is SourceKind.LOCAL:
        volumes.append({"name": "host-model", "hostPath": {"path": local_path(source), "type": "File"}})
        init_mounts.append({"name": "host-model", "mountPath": HOST_MODEL_FILE, "readOnly": True})
    if config.ca_cert_configmap:
        volumes.append({"name": "custom-ca-cert", "configMap": {"name": config.ca_cert_configmap}})
        init_mounts.append({"name": "custom-ca-cert", "mountPath": CA_MOUNT, "readOnly": True})
    script = downloader_script(
        local_source=kind is SourceKind.LOCAL,
        on_change=model.spec.refresh_policy == "OnChange",
        custom_ca=bool(config.ca_cert_configmap),
    )
    init_container = {
        "name": INIT_CONTAINER_NAME,
        "image": config.init_container_image,
        "command": ["sh", "-c", script],
        "env": [
            {"name": "MODEL_SOURCE", "value": source},
            # Empty outside cached mode: left out, as the API server would store it.
            {"name": "CACHE_DIR", "value": cache_dir} if cache_dir else {"name": "CACHE_DIR"},
            {"name": "MODEL_PATH", "value": model_path},
        ],
        "volumeMounts": init_mounts,
        "securityContext": init_security_context(spec),
        "resources": INIT_CONTAINER_RESOURCES,
        "terminationMessagePolicy": "FallbackToLogsOnError",  # curl's error becomes the status message
    }
    return ModelStorage(
        mode="cache" if cached else "emptydir",
        model_path=model_path,
        volumes=tuple(volumes),
        init_containers=(init_container,),
        mounts=({"name": volume_name, "mountPath": MODELS_MOUNT, "readOnly": True},),
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
