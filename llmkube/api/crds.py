"""The CustomResourceDefinitions, built from code (never edited by hand in manifests/crd).

InferenceService: its schema is the API contract, converted to the structural form
(`schema_convert.to_structural`), with the fields the reference added in v0.9 merged in
(`isvc_additions`: a strict superset, every contract path unchanged). Model: its schema is written
here, the reference operator's v0.8.7 Model with its v0.9 GPU fields and our compatible
additions, and a test keeps it in step with the pydantic types in `llmkube.api.model`.
ModelRouter: its schema is in `modelrouter_schema`, kept in step with `llmkube.api.modelrouter`
the same way.
"""

import json
from importlib import resources
from typing import Any

from llmkube.api import constants as c
from llmkube.api.isvc_additions import QUALIFIED_KEY_PATTERN, kube_schemas, with_additions
from llmkube.api.schema_convert import Schema, to_structural

CONTRACT_FILE = "inferenceservice.schema.json"


def contract_schema() -> Schema:
    """The InferenceService contract, `llmkube/api/contract/` (the CRD is checked equal by a test)."""
    text = resources.files("llmkube.api.contract").joinpath(CONTRACT_FILE).read_text()
    schema: Schema = json.loads(text)
    return schema


def _column(name: str, path: str, type_: str = "string", priority: int = 0, description: str = "") -> Schema:
    column: Schema = {"name": name, "type": type_, "jsonPath": path}
    if description:
        column["description"] = description
    if priority:
        column["priority"] = priority
    return column


def _crd(
    *,
    kind: str,
    plural: str,
    singular: str,
    short_names: tuple[str, ...],
    schema: Schema,
    columns: list[Schema],
    scale: bool,
) -> dict[str, Any]:
    subresources: Schema = {"status": {}}
    if scale:
        # No labelSelectorPath: the contract's status has no selector field.
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{c.GROUP}",
            "labels": {c.LABEL_NAME: "llmkube", c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE},
        },
        "spec": {
            "group": c.GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": list(short_names),
                "categories": list(c.CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": c.VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": subresources,
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


def inferenceservice_schema() -> Schema:
    """The CRD's schema: the contract (structural form) and the v0.9 additions."""
    return with_additions(to_structural(contract_schema()))


def inferenceservice_crd() -> dict[str, Any]:
    return _crd(
        kind=c.ISVC_KIND,
        plural=c.ISVC_PLURAL,
        singular=c.ISVC_SINGULAR,
        short_names=c.ISVC_SHORT_NAMES,
        schema=inferenceservice_schema(),
        scale=True,
        columns=[
            _column("Phase", ".status.phase"),
            _column("Model", ".spec.modelRef"),
            _column("Replicas", ".status.readyReplicas", "integer", description="Ready replicas"),
            _column("Reason", ".status.schedulingStatus", priority=1),
            _column("Queue", ".status.queuePosition", "integer", priority=1),
            _column("Priority", ".spec.priority", priority=1),
            _column("Endpoint", ".status.endpoint"),
            _column("Age", ".metadata.creationTimestamp", "date"),
        ],
    )


# -- Model schema ----------------------------------------------------------------------------------


def _s(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def _i(description: str, fmt: str = "int32", **extra: Any) -> Schema:
    return {"type": "integer", "format": fmt, "description": description, **extra}


def _b(description: str) -> Schema:
    return {"type": "boolean", "description": description}


def _o(description: str, properties: Schema, required: list[str] | None = None) -> Schema:
    schema: Schema = {"type": "object", "description": description, "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _condition_schema() -> Schema:
    """metav1.Condition, exactly as the contract spells it for InferenceService."""
    isvc_status = contract_schema()["properties"]["status"]["properties"]
    conditions: Schema = to_structural(isvc_status["conditions"])
    conditions["description"] = "Conditions of the Model: Available, Progressing, Degraded, SourceDrifted."
    return conditions


def model_schema() -> Schema:
    from llmkube.api.model import (
        DEFAULT_WEB_IDENTITY_AUDIENCE,
        MAX_FILE_PATH,
        MAX_FILES,
        ROLE_ARN_PATTERN,
        SHA256_PATTERN,
        SOURCE_PATTERN,
    )

    sharding = _o(
        "How layers or tensors are split across GPUs.",
        {
            "strategy": _s(
                "layer (default), tensor, row, pipeline or none: llama.cpp --split-mode.",
                enum=["layer", "tensor", "row", "pipeline", "none"],
                default="layer",
            ),
            "layerSplit": {
                "type": "array",
                "description": '"start-end" layer ranges, one per GPU: they become --tensor-split ratios.',
                "items": {"type": "string"},
            },
        },
    )
    gpu = _o(
        "GPU requirements.",
        {
            "enabled": _b("Informational: the GPU count decides."),
            "count": _i(
                "GPUs per replica; takes precedence over the InferenceService's resources.gpu.",
                minimum=0,
                maximum=8,
            ),
            "memory": _s("Informational GPU memory per device, e.g. 24Gi."),
            "vendor": _s(
                "nvidia (default), amd or intel: selects the GPU resource name.",
                enum=["nvidia", "amd", "intel"],
                default="nvidia",
            ),
            "layers": _i("Layers to offload (--n-gpu-layers); -1, 0 or unset mean all (99).", minimum=-1),
            "sharding": sharding,
            "resourceName": _s(
                "The extended resource to request for the GPUs instead of the vendor's (e.g. "
                "amd.com/gpu, squat.ai/dri-render); GPU nodes tainted with it are tolerated.",
                pattern=QUALIFIED_KEY_PATTERN,
            ),
            "tolerationKey": _s(
                "The taint key GPU pods tolerate (<key>=present:NoSchedule) instead of the resource name.",
                pattern=QUALIFIED_KEY_PATTERN,
            ),
            "runtime": _s(
                "The GPU compute backend: vulkan or rocm (llama.cpp's image built for it).",
                enum=["vulkan", "rocm"],
            ),
            "resourceClaims": {
                "type": "array",
                "description": "Dynamic Resource Allocation claims for the GPUs (instead of resourceName): "
                "each names a ResourceClaim or a ResourceClaimTemplate of the Model's namespace; "
                "needs a cluster that serves resource.k8s.io.",
                "maxItems": 16,
                "items": kube_schemas()["PodResourceClaim"],
                "x-kubernetes-validations": [
                    {
                        "rule": "self.all(c, has(c.resourceClaimName) != has(c.resourceClaimTemplateName))",
                        "message": "each claim needs exactly one of resourceClaimName and "
                        "resourceClaimTemplateName",
                    }
                ],
            },
        },
    )
    gpu["x-kubernetes-validations"] = [
        {
            "rule": "!(has(self.resourceName) && has(self.resourceClaims) && self.resourceClaims.size() > 0)",
            "message": "resourceClaims and resourceName are mutually exclusive: use one or the other",
        }
    ]
    hardware = _o(
        "Hardware the model is meant for.",
        {
            "accelerator": _s(
                "cpu (default), metal, cuda, rocm, vulkan (any vendor's GPU, through llama.cpp's Vulkan "
                "build) or intel.",
                enum=["cpu", "metal", "cuda", "rocm", "vulkan", "intel"],
                default="cpu",
            ),
            "gpu": gpu,
            "memoryBudget": _s("Metal agent only: memory budget, e.g. 16Gi."),
            "memoryFraction": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "Metal agent only: fraction of host memory to use.",
            },
        },
    )
    spec = _o(
        "Where the weights come from and what hardware they need.",
        {
            "source": _s(
                "http(s)://, file://, pvc://<claim>/<path>, hf://<org>/<repo>[@<revision>], "
                "s3://<bucket>/<key or prefix>, gs://<bucket>/<object or prefix> (llmkube), an absolute "
                "path, or a HuggingFace repo id.",
                pattern=SOURCE_PATTERN,
            ),
            "sha256": _s(
                "Expected SHA-256 of the model file (files[0] when files are listed): checked by "
                "whatever copies or downloads it.",
                pattern=SHA256_PATTERN,
            ),
            "sourceSecretRef": _o(
                "A Secret of the Model's namespace whose keys go to the model downloader only: "
                "HF_TOKEN (Hugging Face); AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, "
                "AWS_ENDPOINT_URL (S3, path-style). Never to the inference container.",
                {"name": _s("Name of the Secret.", default="")},
            )
            | {"x-kubernetes-map-type": "atomic"},
            "refreshPolicy": _s(
                "IfNotPresent (default) or OnChange: re-fetch when the source changes.",
                enum=["IfNotPresent", "OnChange"],
                default="IfNotPresent",
            ),
            "prefetch": _b(
                "Download a remote source (http(s), hf://, s3://, gs://) into the namespace's model cache "
                "before any InferenceService needs it (a Job owned by the Model)."
            ),
            "files": {
                "type": "array",
                "description": "Files to stage from the source (repository- or prefix-relative); the "
                "first is the one the runtime loads, e.g. the first shard of a split GGUF.",
                "maxItems": MAX_FILES,
                "items": {"type": "string", "maxLength": MAX_FILE_PATH},
            },
            "mmproj": _s(
                "A multimodal projector file to stage from the source and pass to runtimes that take "
                "one (llama.cpp --mmproj).",
                maxLength=MAX_FILE_PATH,
            ),
            "webIdentity": _o(
                "llmkube: read an s3:// source with the pod's own identity (IRSA, workload identity "
                "federation): a ServiceAccount token of the audience, projected into the model "
                "downloader, is exchanged with STS (AssumeRoleWithWebIdentity) for temporary keys of "
                "the role, renewed before they expire. The Secret may still give AWS_REGION, "
                "AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_STS.",
                {
                    "roleArn": _s(
                        "The IAM role to assume (arn:aws:iam::<account>:role/<name>); its trust policy "
                        "decides which ServiceAccounts may.",
                        pattern=ROLE_ARN_PATTERN,
                        maxLength=2048,
                    ),
                    "audience": _s(
                        "The token's audience (default sts.amazonaws.com).",
                        default=DEFAULT_WEB_IDENTITY_AUDIENCE,
                        minLength=1,
                        maxLength=256,
                    ),
                },
                required=["roleArn"],
            ),
            "format": _s(
                "gguf (default), mlx, safetensors, pytorch or custom.",
                enum=["gguf", "mlx", "safetensors", "pytorch", "custom"],
                default="gguf",
            ),
            "quantization": _s("Informational, e.g. Q4_K_M."),
            "hardware": hardware,
            "resources": _o(
                "Informational CPU and memory needs.", {"cpu": _s("e.g. 2"), "memory": _s("e.g. 4Gi")}
            ),
        },
        required=["source"],
    )
    gguf = _o(
        "Metadata read from the GGUF header.",
        {
            "architecture": _s("general.architecture"),
            "modelName": _s("general.name"),
            "quantization": _s("general.file_type as a name, e.g. Q4_K_M"),
            "contextLength": _i("<arch>.context_length", "int64"),
            "embeddingSize": _i("<arch>.embedding_length", "int64"),
            "layerCount": _i("<arch>.block_count", "int64"),
            "headCount": _i("<arch>.attention.head_count", "int64"),
            "headCountKV": _i("<arch>.attention.head_count_kv (key/value heads; fewer with GQA)", "int64"),
            "keyLength": _i("<arch>.attention.key_length, when the header sets it", "int64"),
            "valueLength": _i("<arch>.attention.value_length, when the header sets it", "int64"),
            "vocabSize": _i("Number of tokens in the vocabulary", "int64"),
            "tensorBytes": _i("Bytes of tensor data: the weights as loaded", "int64"),
            "tensorCount": _i("Number of tensors", "int64"),
            "fileVersion": _i("GGUF file format version", "int64"),
            "license": _s("general.license"),
        },
    )
    status = _o(
        "Observed state of the Model.",
        {
            "phase": _s(
                "Pending, Downloading, Copying, Ready or Failed.",
                enum=["Pending", "Downloading", "Copying", "Ready", "Failed"],
            ),
            "size": _s(
                'Human-readable size of every file together, e.g. "4.6 GiB"; unset when unknown '
                "(a source the runtime resolves, a private source whose Secret the controller may not read)."
            ),
            "path": _s("Path of the model file as the workload sees it, or empty."),
            "cacheKey": _s("First 16 hex characters of SHA-256 of the source string."),
            "sha256": _s("SHA-256 of the file the controller holds."),
            "sourceETag": _s("ETag of the upstream source at the last fingerprint."),
            "sourceContentLength": _i(
                "Content-Length of the upstream source at the last fingerprint.", "int64"
            ),
            "lastRevalidated": _s("When the source was last fingerprinted.", format="date-time"),
            "acceleratorReady": _b("Whether some node offers the accelerator this model needs."),
            "gguf": gguf,
            "stagedFiles": {
                "type": "array",
                "description": "The repository-relative paths staged in the model cache (spec.files "
                "and spec.mmproj).",
                "items": {"type": "string"},
            },
            "lastUpdated": _s("When the status last changed.", format="date-time"),
            "cacheClear": _o(
                "The last cache clear asked for (the annotation inference.llmkube.dev/clear-cache) "
                "and what became of it.",
                {
                    "request": _s("The annotation's value this answers."),
                    "phase": _s(
                        "Clearing, Cleared, Refilled (a prefetch downloaded the files again since), "
                        "Refused or Failed.",
                        enum=["Clearing", "Cleared", "Refilled", "Refused", "Failed"],
                    ),
                    "cacheKey": _s("The cache directory it is about."),
                    "job": _s("The Job that removes the files."),
                    "message": _s("What happened, in words."),
                    "time": _s("When it reached this phase.", format="date-time"),
                },
            ),
            "observedGeneration": _i(
                "The metadata.generation this status describes: a status of an older spec says nothing "
                "about the current one (InferenceServices wait for it to catch up).",
                "int64",
            ),
            "conditions": _condition_schema(),
        },
    )
    return {
        "type": "object",
        "description": "Model is where an LLM's weights come from.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "required": ["spec"],
    }


def model_crd() -> dict[str, Any]:
    return _crd(
        kind=c.MODEL_KIND,
        plural=c.MODEL_PLURAL,
        singular=c.MODEL_SINGULAR,
        short_names=c.MODEL_SHORT_NAMES,
        schema=model_schema(),
        scale=False,
        columns=[
            _column("Phase", ".status.phase"),
            _column("Size", ".status.size"),
            _column("Accelerator", ".spec.hardware.accelerator"),
            _column("Arch", ".status.gguf.architecture", priority=1),
            _column("Age", ".metadata.creationTimestamp", "date"),
        ],
    )


def modelrouter_crd() -> dict[str, Any]:
    from llmkube.api.modelrouter_schema import modelrouter_schema

    conditions = _condition_schema()
    conditions["description"] = "Conditions of the ModelRouter: Ready, Reconciling, Stalled, Validated, ..."
    return _crd(
        kind=c.ROUTER_KIND,
        plural=c.ROUTER_PLURAL,
        singular=c.ROUTER_SINGULAR,
        short_names=c.ROUTER_SHORT_NAMES,
        schema=modelrouter_schema(conditions),
        scale=False,
        columns=[
            _column("Phase", ".status.phase"),
            _column("Endpoint", ".status.endpoint"),
            _column("Rules", ".status.activeRules", "integer"),
            _column("Default", ".spec.defaultRoute", priority=1),
            _column("Age", ".metadata.creationTimestamp", "date"),
        ],
    )


def all_crds() -> list[dict[str, Any]]:
    return [inferenceservice_crd(), model_crd(), modelrouter_crd(), gpuquota_crd()]


# -- GPUQuota schema -------------------------------------------------------------------------------


def _label_selector(description: str) -> Schema:
    """metav1.LabelSelector, as controller-gen renders it."""
    requirement = _o(
        "A label selector requirement: a key, an operator and values.",
        {
            "key": _s("The label key the selector applies to."),
            "operator": _s(
                "The key's relationship to the values: In, NotIn, Exists or DoesNotExist.",
                enum=["In", "NotIn", "Exists", "DoesNotExist"],
            ),
            "values": {
                "type": "array",
                "description": "The values: non-empty for In and NotIn, empty for Exists and DoesNotExist.",
                "items": {"type": "string"},
                "x-kubernetes-list-type": "atomic",
            },
        },
        required=["key", "operator"],
    )
    selector = _o(
        description,
        {
            "matchLabels": {
                "type": "object",
                "description": "Labels a namespace must carry, key and value.",
                "additionalProperties": {"type": "string"},
            },
            "matchExpressions": {
                "type": "array",
                "description": "Requirements a namespace's labels must meet, all of them.",
                "items": requirement,
                "x-kubernetes-list-type": "atomic",
            },
        },
    )
    selector["x-kubernetes-map-type"] = "atomic"
    return selector


def gpuquota_schema() -> Schema:
    priorities = ["critical", "high", "normal", "low", "batch"]
    spec = _o(
        "A cap on the GPUs and GPU memory the InferenceServices it covers hold together. Exactly one of "
        "namespaceRef and selector (the admission policy refuses both and neither).",
        {
            "selector": _label_selector(
                "The namespaces it covers, by their labels (the reference's meaning). Not with namespaceRef."
            ),
            "namespaceRef": _s("The one namespace it covers. Not with selector."),
            "gpuCount": _i("GPUs the covered services may hold together (0: none)."),
            "vramBytes": _i(
                "GPU memory in bytes they may hold together, by llmkube's memory-fit estimate of each "
                "replica (0 or unset: no cap).",
                fmt="int64",
            ),
            "minPriority": _s(
                "The lowest priority a covered service may have: a service below it is refused "
                "(Failed, reason BelowQuotaPriority).",
                enum=priorities,
            ),
            "costBudgetRef": _s("The reference's placeholder for a cost budget: accepted, not enforced."),
        },
        required=["gpuCount"],
    )
    holder = _o(
        "A service holding GPUs under the quota.",
        {
            "namespace": _s("Its namespace."),
            "name": _s("Its name."),
            "replicas": _i("Replicas admitted."),
            "gpus": _i("GPUs they hold."),
            "vramBytes": _i("GPU memory they hold, by the memory-fit estimate.", fmt="int64"),
        },
        required=["namespace", "name", "replicas", "gpus"],
    )
    waiter = _o(
        "A service waiting on the quota, in queue order.",
        {
            "namespace": _s("Its namespace."),
            "name": _s("Its name."),
            "needsGPUs": _i("GPUs its next replica needs."),
            "needsVRAMBytes": _i("GPU memory its next replica needs.", fmt="int64"),
            "reason": _s("QuotaExceeded, or BelowQuotaPriority for a refused one."),
            "message": _s("What it waits for."),
        },
        required=["namespace", "name", "needsGPUs", "reason"],
    )
    conditions = _condition_schema()
    conditions["description"] = "Conditions of the GPUQuota: Ready, Reconciling, Stalled, Validated."
    status = _o(
        "What the GPU queue holds under the quota.",
        {
            "usedGPUCount": _i("GPUs the covered services hold."),
            "usedVRAMBytes": _i("GPU memory they hold, by the memory-fit estimate.", fmt="int64"),
            "admissionDenials": _i(
                "The reference's cumulative denial count: not written by llmkube.", fmt="int64"
            ),
            "lastDenial": _s("The reference's last denial time: not written by llmkube.", format="date-time"),
            "holders": {"type": "array", "description": "The services holding GPUs.", "items": holder},
            "waiters": {
                "type": "array",
                "description": "The services waiting, in queue order.",
                "items": waiter,
            },
            "waiting": _i("How many services wait on the quota."),
            "observedGeneration": _i("The generation this status describes.", fmt="int64"),
            "lastUpdated": _s("When the status last changed.", format="date-time"),
            "conditions": conditions,
        },
    )
    return _o(
        "GPUQuota caps the GPUs a team's InferenceServices hold; llmkube's GPU queue enforces it.",
        {
            "apiVersion": _s("APIVersion defines the versioned schema of this representation of an object."),
            "kind": _s("Kind is a string value representing the REST resource this object represents."),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        required=["spec"],
    )


def gpuquota_crd() -> dict[str, Any]:
    return _crd(
        kind=c.QUOTA_KIND,
        plural=c.QUOTA_PLURAL,
        singular=c.QUOTA_SINGULAR,
        short_names=c.QUOTA_SHORT_NAMES,
        schema=gpuquota_schema(),
        scale=False,
        columns=[
            _column("GPU Count", ".spec.gpuCount", "integer"),
            _column("Used GPUs", ".status.usedGPUCount", "integer"),
            _column("VRAM", ".spec.vramBytes", "integer", priority=1, description="GPU memory cap in bytes"),
            _column("Used VRAM", ".status.usedVRAMBytes", "integer", priority=1),
            _column("Waiting", ".status.waiting", "integer"),
            _column("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            _column("Age", ".metadata.creationTimestamp", "date"),
        ],
    )
