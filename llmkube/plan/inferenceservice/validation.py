"""What the contract schema cannot express, checked before anything is applied: bad input never
crashes the controller nor makes it retry for ever.

An *error* makes the service Failed with a message naming the field and the value, and nothing is
applied (the running workload is left as it is). A *warning* is a setting that has no effect in
this configuration; it is reported in the `SpecValid` condition and as an event, and planning goes
on. Nothing here raises.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from llmkube.api.inferenceservice import InferenceService, InferenceServiceSpec
from llmkube.apimachinery.quantity import QuantityError, parse_quantity
from llmkube.plan.apiserver.kube_syntax import dns1123_subdomain_errors
from llmkube.plan.apiserver.labels import label_map_errors
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.drain import drain_warnings
from llmkube.plan.inferenceservice.hardening import memory_limit
from llmkube.plan.inferenceservice.hpa import hpa_errors
from llmkube.plan.inferenceservice.names import MAX_LABEL_VALUE_LENGTH
from llmkube.plan.inferenceservice.resources import quantity_errors
from llmkube.plan.inferenceservice.runtimes import RuntimeDefaults

Severity = Literal["error", "warning"]

_LLAMACPP = frozenset({"llamacpp"})
_SERVERS = frozenset({"llamacpp", "llamacpp-router", "vllm", "tgi", "sglang"})
# Runtime-specific fields and the runtimes that honour them; set on any other runtime, they are
# ignored, and the user is told so.
RUNTIME_FIELDS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "contextSize": _LLAMACPP,
        "ropeScaling": _LLAMACPP,
        "flashAttention": _LLAMACPP,
        "jinja": _LLAMACPP,
        "cacheTypeK": _LLAMACPP,
        "cacheTypeV": _LLAMACPP,
        "cacheTypeCustomK": _LLAMACPP,
        "cacheTypeCustomV": _LLAMACPP,
        "moeCPUOffload": _LLAMACPP,
        "moeCPULayers": _LLAMACPP,
        "noKvOffload": _LLAMACPP,
        "noWarmup": _LLAMACPP,
        "reasoningBudget": _LLAMACPP,
        "reasoningBudgetMessage": _LLAMACPP,
        "metadataOverrides": _LLAMACPP,
        "tensorOverrides": _LLAMACPP,
        "batchSize": _LLAMACPP,
        "uBatchSize": _LLAMACPP,
        "parallelSlots": frozenset({"llamacpp", "vllm", "tgi"}),
        "extraArgs": _SERVERS,
        "args": frozenset({"generic"}),
        "vllmConfig": frozenset({"vllm"}),
        "tgiConfig": frozenset({"tgi"}),
        "personaPlexConfig": frozenset({"personaplex"}),
        # v0.9
        "sglangConfig": frozenset({"sglang"}),
        "bindAddress": _SERVERS,
        "mode": frozenset({"llamacpp", "llamacpp-router", "vllm", "sglang"}),
    }
)
#: v0.9 fields that only the reference's oMLX host runtime reads, and features of the reference
#: llmkube does not have: accepted (a v0.9 manifest applies), reported as having no effect.
NO_EFFECT_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "turboQuantBits": "only the reference's oMLX host runtime reads it",
        "pagedSSDCacheDir": "only the reference's oMLX host runtime reads it",
        "hotCacheMaxSize": "only the reference's oMLX host runtime reads it",
        "pagedSSDCacheMaxSize": "only the reference's oMLX host runtime reads it",
        "disruption": "llmkube manages no Karpenter annotation (set karpenter.sh/do-not-disrupt in "
        "podAnnotations)",
        "slo": "llmkube creates no Pyrra ServiceLevelObjective",
        "maxPodLifetimeIdleTimeoutSeconds": "a recycled pod's drain (rolloutPolicy.idleTimeoutSeconds) "
        "bounds the wait",
    }
)


@dataclass(frozen=True)
class Issue:
    field: str
    message: str
    severity: Severity
    #: the reason an error is reported under (status and Event); "" for the default, InvalidSpec
    reason: str = ""

    def text(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class ValidationInputs:
    isvc: InferenceService
    runtime: RuntimeDefaults
    gpu_count: int
    metal: bool
    priority_class_name: str
    priority_class_exists: bool
    uses_cache_pvc: bool
    config: OperatorConfig
    #: the cluster's RuntimeClasses (None: unknown, not checked)
    runtime_classes: frozenset[str] | None = None


def validate(inputs: ValidationInputs) -> list[Issue]:
    return [*_errors(inputs), *_warnings(inputs)]


def _is_set(value: Any) -> bool:
    """Explicit false, empty strings and empty lists do not ask for anything."""
    return value is not None and value is not False and value != "" and value != []


def _errors(inputs: ValidationInputs) -> list[Issue]:
    isvc, spec = inputs.isvc, inputs.isvc.spec
    found = [Issue(path, message, "error") for path, message in quantity_errors(spec.resources)]
    if not found and (limit_problem := memory_limit(spec.resources, isvc.metadata.annotations).problem):
        found.append(Issue(*limit_problem, "error"))
    label_errors = [
        *label_map_errors("spec.podLabels", spec.pod_labels, check_values=True),
        *label_map_errors("spec.nodeSelector", spec.node_selector, check_values=True),
        *label_map_errors("spec.podAnnotations", spec.pod_annotations, check_values=False),
    ]
    found += [Issue(path, message, "error") for path, message in label_errors]
    name = isvc.metadata.name or ""
    for path, value in (("metadata.name", name), ("spec.modelRef", spec.model_ref)):
        if len(value) > MAX_LABEL_VALUE_LENGTH:
            found.append(
                Issue(
                    path,
                    f'"{value}" is {len(value)} characters; it is used as a label value, '
                    f"which allows at most {MAX_LABEL_VALUE_LENGTH}",
                    "error",
                )
            )
    if not inputs.priority_class_exists:
        field = "spec.priorityClassName"
        found.append(Issue(field, f'PriorityClass "{inputs.priority_class_name}" does not exist', "error"))
    found += _v09_errors(spec)
    if inputs.metal:
        return found  # no workload of ours: image, autoscaling and the cache PVC do not apply
    found += _runtime_class_errors(spec.runtime_class_name, inputs.runtime_classes)
    if not spec.image and not inputs.runtime.default_image:
        message = f'required for runtime "{inputs.runtime.name}", which has no default image'
        found.append(Issue("spec.image", message, "error"))
    found += [Issue(path, message, "error") for path, message in hpa_errors(spec.autoscaling)]
    if inputs.uses_cache_pvc:
        try:
            parse_quantity(inputs.config.model_cache_size)
        except QuantityError:
            message = (
                f'invalid quantity "{inputs.config.model_cache_size}": cannot create the model cache PVC'
            )
            found.append(Issue("operator --model-cache-size", message, "error"))
    return found


def _warnings(inputs: ValidationInputs) -> list[Issue]:
    spec, runtime = inputs.isvc.spec, inputs.runtime.name
    data = spec.model_dump(by_alias=True)
    found = [
        Issue(f"spec.{field}", f'is ignored by runtime "{runtime}"', "warning")
        for field, runtimes in RUNTIME_FIELDS.items()
        if runtime not in runtimes and _is_set(data.get(field))
    ]
    found += [
        Issue(f"spec.{field}", f"has no effect here: {why}", "warning")
        for field, why in NO_EFFECT_FIELDS.items()
        if _is_set(data.get(field))
    ]
    found += _v09_warnings(spec)
    if runtime == "llamacpp":
        # On the metal path a host agent runs the server on its own hardware (Metal: flash attention
        # on by default); the controller knows no GPU count there, and the agent decides.
        if spec.flash_attention and inputs.gpu_count == 0 and not inputs.metal:
            found.append(Issue("spec.flashAttention", "is ignored without a GPU", "warning"))
        if spec.reasoning_budget_message and spec.reasoning_budget is None:
            found.append(
                Issue("spec.reasoningBudgetMessage", "is ignored without reasoningBudget", "warning")
            )
    config = spec.vllm_config
    if runtime == "vllm" and config is not None and inputs.gpu_count == 0:
        if config.cpu_offload_gb is not None:
            found.append(
                Issue("spec.vllmConfig.cpuOffloadGB", "CPU offload is ignored without a GPU", "warning")
            )
        if config.gpu_memory_utilization is not None:
            found.append(Issue("spec.vllmConfig.gpuMemoryUtilization", "is ignored without a GPU", "warning"))
    found += _non_positive_sizes(inputs.isvc.spec, runtime)
    if not inputs.metal:  # a host agent stops its own servers
        annotations = inputs.isvc.metadata.annotations
        drains = drain_warnings(
            annotations, runtime, inputs.runtime.in_flight_metrics, inputs.isvc.spec.rollout_policy
        )
        found += [Issue(path, message, "warning") for path, message in drains]
    autoscaling = spec.autoscaling
    low = autoscaling.min_replicas or 1 if autoscaling is not None else 1
    if (
        autoscaling is not None
        and not inputs.metal
        and spec.replicas
        and not low <= spec.replicas <= autoscaling.max_replicas
    ):
        # `kubectl scale` of an autoscaled service past its bounds lands here: say who owns the
        # count. (Within the bounds spec.replicas is the starting count of a new Deployment.)
        message = (
            f"{spec.replicas} is outside the autoscaling bounds ({low}-{autoscaling.max_replicas}): the "
            "HorizontalPodAutoscaler owns the replica count, spec.replicas only sets the starting count of "
            "a new Deployment (within the bounds); change spec.autoscaling, or set replicas to 0 to stop it"
        )
        found.append(Issue("spec.replicas", message, "warning"))
    if inputs.metal and spec.autoscaling is not None:
        found.append(
            Issue("spec.autoscaling", "is ignored for metal models (the host agent runs them)", "warning")
        )
    elif autoscaling is not None and not autoscaling.metrics and not inputs.runtime.exports_hpa_metric:
        # The HPA is still created as the spec says (on the reference's fallback metric), but it can
        # never scale: say so, naming the field that fixes it.
        message = (
            f"is empty, so the HorizontalPodAutoscaler scales on {inputs.runtime.hpa_metric}, which "
            f'runtime "{runtime}" does not export: it never scales; name the metric your server '
            "exports (a Pods metric, served by a custom metrics adapter) or cpu or memory (Resource)"
        )
        found.append(Issue("spec.autoscaling.metrics", message, "warning"))
    return found


def _v09_warnings(spec: InferenceServiceSpec) -> list[Issue]:
    found: list[Issue] = []
    endpoint, resources = spec.endpoint, spec.resources
    if endpoint is not None and endpoint.gateway is not None:
        message = "has no effect here: llmkube generates no Envoy AI Gateway routes (use a ModelRouter)"
        found.append(Issue("spec.endpoint.gateway", message, "warning"))
    if resources is not None and resources.gpu_sharing is not None:
        message = "has no effect here: llmkube keeps no GPU quota accounting (GPUs are whole devices)"
        found.append(Issue("spec.resources.gpuSharing", message, "warning"))
    if spec.model_cache is not None and spec.skip_model_init:
        found.append(
            Issue("spec.modelCache", "is ignored with skipModelInit: nothing is downloaded", "warning")
        )
    if spec.suspend and spec.autoscaling is not None:
        message = "is not applied while spec.suspend is true (the HorizontalPodAutoscaler is removed)"
        found.append(Issue("spec.autoscaling", message, "warning"))
    return found


def _non_positive_sizes(spec: InferenceServiceSpec, runtime: str) -> list[Issue]:
    """Sizes a runtime passes on only when positive (the schema cannot say so): zero or less is
    dropped from the command line, and the user is told."""
    sizes: list[tuple[str, int | None]] = []
    if runtime == "vllm" and spec.vllm_config is not None:
        config = spec.vllm_config
        sizes += [
            ("spec.vllmConfig.tensorParallelSize", config.tensor_parallel_size),
            ("spec.vllmConfig.maxModelLen", config.max_model_len),
        ]
    if runtime == "tgi" and spec.tgi_config is not None:
        sizes += [
            ("spec.tgiConfig.maxInputLength", spec.tgi_config.max_input_length),
            ("spec.tgiConfig.maxTotalTokens", spec.tgi_config.max_total_tokens),
        ]
    return [
        Issue(path, f"{value} is ignored: it must be at least 1", "warning")
        for path, value in sizes
        if value is not None and value <= 0
    ]


def _v09_errors(spec: InferenceServiceSpec) -> list[Issue]:
    """The v0.9 fields' mistakes the schema cannot say: a node port on a Service without one, a
    mount of no volume, a cache claim that is no claim name of this namespace."""
    found: list[Issue] = []
    endpoint = spec.endpoint
    if (
        endpoint is not None
        and endpoint.node_port is not None
        and endpoint.type not in ("NodePort", "LoadBalancer")
    ):
        message = f'{endpoint.node_port} needs endpoint.type NodePort or LoadBalancer (not "{endpoint.type}")'
        found.append(Issue("spec.endpoint.nodePort", message, "error"))
    claim = spec.model_cache.claim_name if spec.model_cache else None
    if claim and (problems := dns1123_subdomain_errors(claim)):
        message = f'"{claim}" is not a claim of this namespace: {"; ".join(problems)}'
        found.append(Issue("spec.modelCache.claimName", message, "error"))
    volumes = {str(v.get("name") or "") for v in spec.extra_volumes or []}
    for index, mount in enumerate(spec.extra_volume_mounts or []):
        name = str(mount.get("name") or "")
        if name not in volumes and name not in BUILT_IN_VOLUMES:
            found.append(
                Issue(
                    f"spec.extraVolumeMounts[{index}].name",
                    f'"{name}" names no volume of extraVolumes',
                    "error",
                )
            )
    for index, volume in enumerate(spec.extra_volumes or []):
        if str(volume.get("name") or "") in BUILT_IN_VOLUMES:
            message = f'"{volume.get("name")}" is a volume the controller makes: choose another name'
            found.append(Issue(f"spec.extraVolumes[{index}].name", message, "error"))
    return found


#: the volumes the controller itself may put in a pod (storage, hardening, the CA bundle)
BUILT_IN_VOLUMES = frozenset(
    {"model-source", "model-cache", "model-storage", "host-model", "custom-ca-cert", "tmp", "data"}
)


def _runtime_class_errors(name: str | None, known: frozenset[str] | None) -> list[Issue]:
    """A RuntimeClass that does not exist leaves every pod unadmitted (the ReplicaSet's creates are
    refused), with nothing said on the service. A name that is not even a valid one is left to the
    object checks, which say so."""
    if not name or known is None or name in known or dns1123_subdomain_errors(name):
        return []
    return [Issue("spec.runtimeClassName", f'RuntimeClass "{name}" does not exist', "error")]
