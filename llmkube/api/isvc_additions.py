"""The InferenceService fields added since the v0.8.7 contract: the reference operator's v0.9.19
names, types and bounds, in the CRD's structural form, with descriptions in our words.

The CRD is `to_structural(contract)` with these merged in (`crds.inferenceservice_schema`): every
path of the contract stays exactly as it was; the only values a contract path gains are the enum
members v0.9 added to it (`spec.runtime`: `llamacpp-router`, `sglang`; `status.phase`:
`Suspended`), so every object valid under the contract is valid, and means the same, here
(tests/unit/api/test_contract_superset.py compares the two path by path). The Kubernetes
sub-objects (affinity, spread constraints, volumes, mounts) carry Kubernetes' own schemas
(`llmkube/api/kube/`), so the API server checks them at `kubectl apply` as it checks a pod's.
docs/compatibility.md says which of these fields llmkube acts on, which it accepts and reports as
having no effect, and which it refuses.
"""

import json
from functools import cache
from importlib import resources
from typing import Any

Schema = dict[str, Any]

#: enum members v0.9 added to contract paths (path -> the members, in the reference's order)
ENUM_ADDITIONS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("spec", "runtime"): ("llamacpp-router", "sglang"),
    ("status", "phase"): ("Suspended",),
}
#: a Kubernetes quantity, as the reference spells the pattern of `resources.ephemeralStorage`
QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
#: `<domain>/<name>`: an extended resource or taint key (`hardware.gpu.resourceName`, `tolerationKey`)
QUALIFIED_KEY_PATTERN = r"^[a-z0-9.\-]+/[a-z0-9._\-]+$"
#: llama.cpp's --spec-type spellings, and the reference's older aliases (mtp, draft, disabled)
SPEC_TYPES = (
    "none", "disabled", "mtp", "draft", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash",
    "draft-dspark", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
)  # fmt: skip
#: the speculative types that need draft weights (draftModelRef or draftModel)
DRAFT_WEIGHT_TYPES = ("draft", "draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark")
INT32_MAX = 2**31 - 1


@cache
def kube_schemas() -> dict[str, Schema]:
    """Kubernetes core/v1 schemas (hack/gen-kube-schemas.py writes them from Kubernetes' OpenAPI)."""
    text = resources.files("llmkube.api.kube").joinpath("corev1.schema.json").read_text()
    loaded: dict[str, Schema] = json.loads(text)
    return loaded


def _kube(name: str, description: str) -> Schema:
    return {**json.loads(json.dumps(kube_schemas()[name])), "description": description}


def _s(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def _i(description: str, fmt: str = "int32", **extra: Any) -> Schema:
    return {"type": "integer", "format": fmt, "description": description, **extra}


def _b(description: str, **extra: Any) -> Schema:
    return {"type": "boolean", "description": description, **extra}


def _n(description: str, **extra: Any) -> Schema:
    return {"type": "number", "description": description, **extra}


def _o(
    description: str, properties: Schema, required: list[str] | None = None, extra: Schema | None = None
) -> Schema:
    schema: Schema = {"type": "object", "description": description, "properties": properties, **(extra or {})}
    if required:
        schema["required"] = required
    return schema


def _list(description: str, items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "description": description, "items": items, **extra}


def _secret_key_selector(description: str) -> Schema:
    return _o(
        description,
        {
            "key": _s("The key of the Secret to read."),
            "name": _s("The Secret's name, in the service's namespace.", default=""),
            "optional": _b("Whether the Secret or its key may be missing."),
        },
        required=["key"],
        extra={"x-kubernetes-map-type": "atomic"},
    )


def _speculative_decoding() -> Schema:
    weight_types = ", ".join(f"'{t}'" for t in DRAFT_WEIGHT_TYPES)
    given = (
        "((has(self.draftModelRef) && self.draftModelRef.size() > 0) || "
        "(has(self.draftModel) && self.draftModel.size() > 0))"
    )
    return _o(
        "Speculative decoding (llama.cpp, and vLLM for draft models and n-grams): --spec-type, "
        "--spec-draft-n-max, --spec-draft-p-min and the draft weights (-md).",
        {
            "type": _s(
                "The method, as llama.cpp's --spec-type spells it; mtp means draft-mtp, draft means "
                "draft-simple, disabled and none turn it off.",
                enum=list(SPEC_TYPES),
            ),
            "draftModelRef": _s(
                "A Model of the service's namespace holding the draft weights; staged like the "
                "service's own model and mounted beside it."
            ),
            "draftModel": _s(
                "A file of the target Model's spec.files holding the draft weights.",
                minLength=1,
                maxLength=253,
            ),
            "nDraftMax": _i("Most draft tokens proposed per step (--spec-draft-n-max).", minimum=1),
            "pMin": _n(
                "Least probability a drafted token needs to continue the draft (--spec-draft-p-min).",
                minimum=0,
                maximum=1,
            ),
        },
        required=["type"],
        extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"!(self.type in [{weight_types}]) || {given}",
                    "message": "this type needs draft weights: set draftModelRef (a Model of this "
                    "namespace) or draftModel (a file of the Model's spec.files)",
                },
                {
                    "rule": f"(self.type in [{weight_types}, 'draft-mtp']) || !{given}",
                    "message": "draftModelRef and draftModel are only for the draft-model types; "
                    "the ngram types and none need no weights",
                },
                {
                    "rule": "!((has(self.draftModelRef) && self.draftModelRef.size() > 0) && "
                    "(has(self.draftModel) && self.draftModel.size() > 0))",
                    "message": "set one of draftModelRef and draftModel, not both",
                },
            ]
        },
    )


def _model_cache() -> Schema:
    return _o(
        "Where this service keeps its model weights, instead of the controller's cache claim.",
        {
            "persistence": _s(
                "Cached (the default): the weights stay on a cache volume across restarts. "
                "Ephemeral: they are downloaded into an emptyDir every time a pod starts, and no "
                "cache claim is used (size it with resources.ephemeralStorage).",
                enum=["Cached", "Ephemeral"],
            ),
            "claimName": _s(
                "An existing PersistentVolumeClaim of the service's namespace to cache the weights "
                "in (under <cacheKey>/, as the controller's own claim). It must exist; llmkube "
                "never creates, changes or deletes it.",
                minLength=1,
                maxLength=253,
            ),
        },
        extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!(has(self.persistence) && self.persistence == 'Ephemeral' && "
                    "has(self.claimName))",
                    "message": "claimName cannot be set with persistence Ephemeral: one names a cache "
                    "volume, the other asks for none",
                }
            ]
        },
    )


def _sglang_config() -> Schema:
    return _o(
        'Settings of the SGLang server (runtime "sglang").',
        {
            "tensorParallelSize": _i("GPUs for tensor parallelism (--tp).", minimum=1),
            "expertParallelSize": _i("Expert parallelism for MoE models (--ep-size).", minimum=1),
            "dataParallelSize": _i("Data-parallel replicas inside the server (--dp).", minimum=1),
            "contextLength": _i("Context length (--context-length).", minimum=128),
            "memFractionStatic": _n(
                "Fraction of GPU memory for weights and KV cache (--mem-fraction-static); GPU only.",
                minimum=0.1,
                maximum=0.99,
            ),
            "chunkedPrefillSize": _i("Chunked prefill size (--chunked-prefill-size).", minimum=512),
            "maxRunningRequests": _i("Most requests running at once (--max-running-requests).", minimum=1),
            "quantization": _s("Quantization method (--quantization), passed as written."),
            "kvCacheDtype": _s(
                "KV cache element type (--kv-cache-dtype); auto lets SGLang decide.",
                enum=["auto", "fp8_e5m2", "fp8_e4m3"],
                default="auto",
            ),
            "kvCacheCustomDtype": _s("A KV cache type outside the enum; wins over kvCacheDtype."),
            "attentionBackend": _s(
                "Attention implementation (--attention-backend).",
                enum=["flashinfer", "flash_attn", "torch_native"],
            ),
            "enablePrefixCaching": _b("false turns the radix cache off (--disable-radix-cache)."),
            "toolCallParser": _s(
                "Tool-call parser (--tool-call-parser).",
                enum=["llama3", "qwen3", "qwen25", "hermes", "functionary", "mistral"],
            ),
            "reasoningParser": _s("Reasoning parser (--reasoning-parser).", enum=["qwen3", "deepseek-r1"]),
            "chatTemplate": _s("Chat template name or path (--chat-template)."),
            "speculative": _o(
                "SGLang's own speculative decoding.",
                {
                    "enabled": _b("Turns it on; the other fields count only then."),
                    "algorithm": _s("--speculative-algorithm.", enum=["EAGLE", "EAGLE3", "Medusa"]),
                    "draftModelPath": _s(
                        "Path of the draft model in the container (--speculative-draft-model-path)."
                    ),
                    "numSteps": _i("--speculative-num-steps.", minimum=1),
                    "eagleTopK": _i("--speculative-eagle-topk.", minimum=1),
                    "numDraftTokens": _i("--speculative-num-draft-tokens.", default=4, minimum=1),
                    "acceptThresholdSingle": _n(
                        "--speculative-accept-threshold-single.", minimum=0, maximum=1
                    ),
                    "acceptThresholdAcc": _n("--speculative-accept-threshold-acc.", minimum=0, maximum=1),
                },
            ),
            "loraModules": _list("LoRA adapters as name=path (--lora-paths).", {"type": "string"}),
            "maxLoraRank": _i("Largest LoRA rank (--max-lora-rank).", minimum=1),
            "loraTargetModules": _list(
                "Modules LoRA applies to (--lora-target-modules).", {"type": "string"}
            ),
            "loraAdapters": _list(
                "LoRA adapters by name and path (--lora-paths), before loraModules.",
                _o(
                    "One adapter.",
                    {"name": _s("Its name.", minLength=1), "path": _s("Its path.", minLength=1)},
                    required=["name", "path"],
                ),
            ),
            "logLevel": _s("--log-level.", enum=["debug", "info", "warning", "error"]),
            "trustRemoteCode": _b("--trust-remote-code: runs the model repository's own code."),
            "skipTokenizerInit": _b("--skip-tokenizer-init."),
            "hfTokenSecretRef": _secret_key_selector("A Secret key holding a HuggingFace token (HF_TOKEN)."),
        },
    )


def _rollout_policy() -> Schema:
    return _o(
        "How a new pod template replaces running pods. waitForIdle lets in-flight requests finish "
        "first: llmkube drains each old pod before it stops (its preStop hook waits until the "
        "server has no request in flight, up to idleTimeoutSeconds) and takes it out of the "
        "Service first.",
        {
            "waitForIdle": _b("Let each old pod finish its requests before it stops."),
            "idleTimeoutSeconds": {
                "type": "integer",
                "description": "The longest a pod waits to become idle (300 when unset or 0).",
                "minimum": 0,
                "default": 300,
            },
            "force": _b("Replace pods at once, whatever waitForIdle says."),
        },
    )


def _gpu_sharing() -> Schema:
    return _o(
        "How the service shares its GPU (the reference's quota accounting): accepted, no effect here.",
        {
            "mode": _s(
                "exclusive, shared or partitioned.",
                enum=["exclusive", "shared", "partitioned"],
                default="exclusive",
            ),
            "profile": _s("The hardware partition (e.g. a MIG profile) for mode partitioned."),
            "memoryLimitGiB": _i("Declared device memory in shared mode.", minimum=1),
        },
        extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.mode) || self.mode != 'partitioned' || "
                    "(has(self.profile) && self.profile.size() > 0)",
                    "message": "profile is required when mode is partitioned",
                },
                {
                    "rule": "!has(self.profile) || self.profile.size() == 0 || "
                    "(has(self.mode) && self.mode == 'partitioned')",
                    "message": "profile is only valid when mode is partitioned",
                },
                {
                    "rule": "!has(self.memoryLimitGiB) || (has(self.mode) && self.mode == 'shared')",
                    "message": "memoryLimitGiB is only valid when mode is shared",
                },
            ]
        },
    )


def spec_additions() -> Schema:
    """New properties of `spec` (structural form)."""
    return {
        "mode": _s(
            "What the service serves: chat (completions, the default), embedding (/v1/embeddings) "
            "or rerank (/v1/rerank); sets the runtime's flags (an extraArgs flag wins) and how "
            "ModelRouters route to it. Unset: read from extraArgs and endpoint.path. status.mode "
            "says which.",
            enum=["chat", "embedding", "rerank"],
        ),
        "suspend": _b(
            "Stop the workload and keep spec.replicas: the Deployment is scaled to 0, the HPA "
            "removed, and the phase is Suspended; false again restores the replicas (for Kueue and "
            "other admission controllers)."
        ),
        "revisionHistoryLimit": _i(
            "Old ReplicaSets the Deployment keeps for rollback (Kubernetes' default 10 when unset).",
            minimum=0,
        ),
        "topologySpreadConstraints": _list(
            "How the service's pods spread across nodes and zones: the pod's "
            "topologySpreadConstraints (use podLabels or the service's own labels in labelSelector).",
            _kube("TopologySpreadConstraint", "A pod topology spread constraint."),
        ),
        "affinity": _kube(
            "Affinity",
            "The pod's node and pod (anti-)affinity, held to the admin's placement rules (docs/security.md).",
        ),
        "speculativeDecoding": _speculative_decoding(),
        "turboQuantBits": _i(
            "The reference's oMLX host runtime only (--kv-cache-quant): accepted, no effect here.",
            enum=[3, 6, 8],
        ),
        "pagedSSDCacheDir": _s("The reference's oMLX host runtime only: accepted, no effect here."),
        "hotCacheMaxSize": _s("The reference's oMLX host runtime only: accepted, no effect here."),
        "pagedSSDCacheMaxSize": _s("The reference's oMLX host runtime only: accepted, no effect here."),
        "extraVolumes": _list(
            "More volumes for the pod, after the model's; held to the admin's volume rules "
            "(docs/security.md). Mount them with extraVolumeMounts.",
            _kube("Volume", "A pod volume."),
        ),
        "extraVolumeMounts": _list(
            "Mounts of extraVolumes in the inference container, after the model's.",
            _kube("VolumeMount", "A volume mount."),
        ),
        "bindAddress": _s(
            "The address the server listens on (--host; TGI --hostname); an extraArgs --host wins. "
            "Unset: every interface."
        ),
        "modelCache": _model_cache(),
        "sglangConfig": _sglang_config(),
        "disruption": _o(
            "The reference's Karpenter do-not-disrupt annotation while starting: accepted, no effect "
            "here (set karpenter.sh/do-not-disrupt in podAnnotations).",
            {
                "protectStartup": _b("Protect pods while the service starts.", default=True),
                "protectAlways": _b("Protect pods always."),
            },
        ),
        "rolloutPolicy": _rollout_policy(),
        "slo": _o(
            "A Pyrra ServiceLevelObjective the reference creates: accepted, no effect here.",
            {
                "name": _s("The SLO's name."),
                "objective": _s("Target percentage, 50 to 99.999.", pattern=r"^[0-9]+(\.[0-9]+)?$"),
                "window": _s("Rolling window.", pattern=r"^[0-9]+[mhdw]$", default="28d"),
                "indicator": _s(
                    "availability or latency.", enum=["availability", "latency"], default="availability"
                ),
                "latencyThreshold": _s(
                    "Seconds a good request takes at most.", pattern=r"^[0-9]+(\.[0-9]+)?$"
                ),
            },
            required=["objective"],
            extra={
                "x-kubernetes-validations": [
                    {
                        "rule": "self.indicator != 'latency' || has(self.latencyThreshold)",
                        "message": "latencyThreshold is required when indicator is latency",
                    }
                ]
            },
        ),
        "maxPodLifetimeSeconds": _i(
            "Recycle a pod once it has run this long: one pod at a time, evicted (so "
            "PodDisruptionBudgets hold) only while every other replica is ready.",
            "int64",
            minimum=1,
        ),
        "maxPodLifetimeIdleTimeoutSeconds": _i(
            "With rolloutPolicy.waitForIdle: how long past its lifetime a pod may wait to be idle "
            "(its drain bounds the wait here).",
            "int64",
            minimum=0,
        ),
    }


def endpoint_additions() -> Schema:
    return {
        "nodePort": _i(
            "The node port to pin when type is NodePort (or LoadBalancer), 30000-32767; only where "
            "the admin allows NodePort Services.",
            minimum=30000,
            maximum=32767,
        ),
        "gateway": _o(
            "Envoy AI Gateway exposure the reference generates: accepted, no effect here.",
            {
                "enabled": _b("Opt in."),
                "gatewayRef": _o(
                    "The Gateway.",
                    {"name": _s("Its name."), "namespace": _s("Its namespace.")},
                    required=["name"],
                ),
                "modelName": _s("The model name clients send."),
            },
            required=["gatewayRef"],
        ),
    }


def resources_additions() -> Schema:
    return {
        "ephemeralStorage": _s(
            "Node disk for the pod (requests and limits of ephemeral-storage; with "
            "modelCache.persistence Ephemeral also the size limit of the weights' emptyDir).",
            pattern=QUANTITY_PATTERN,
        ),
        "gpuSharing": _gpu_sharing(),
    }


def status_additions() -> Schema:
    return {
        "mode": _s("The serving mode in effect: chat, embedding or rerank."),
        "acceleration": _o(
            "What the reference's host agent reports about its device: never written here.",
            {
                "device": _s("The device."),
                "layersOffloaded": _i("Layers on the device."),
                "layersTotal": _i("Layers in all."),
            },
        ),
        "gateway": _o(
            "The reference's gateway exposure: never written here.",
            {
                "routeReady": _b("Whether the route is ready."),
                "modelName": _s("The model name routed."),
                "endpoint": _s("The gateway's endpoint."),
                "authEnabled": _b("Whether the gateway asks for credentials."),
            },
        ),
    }


def with_additions(structural: Schema) -> Schema:
    """The contract's structural schema with the v0.9 fields: a new object, the input untouched."""
    schema: Schema = json.loads(json.dumps(structural))
    spec = schema["properties"]["spec"]["properties"]
    status = schema["properties"]["status"]["properties"]
    for target, extra in (
        (spec, spec_additions()),
        (spec["endpoint"]["properties"], endpoint_additions()),
        (spec["resources"]["properties"], resources_additions()),
        (status, status_additions()),
    ):
        clash = sorted(set(target) & set(extra))
        if clash:  # an addition never replaces a contract path
            raise ValueError(f"fields already in the contract: {clash}")
        target.update(extra)
    for (section, field), members in ENUM_ADDITIONS.items():
        node = schema["properties"][section]["properties"][field]
        node["enum"] = [*node["enum"], *members]
    return schema
