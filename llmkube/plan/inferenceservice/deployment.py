"""The Deployment intent: the reference operator's Deployment, field for field, but for its defects.

Server-side apply replaces the reference's read-modify-write: the intent holds only the fields we
own. Pod-template labels and annotations other managers add (`kubectl rollout restart`, sidecar
injectors) survive, keys the user removes from podLabels/podAnnotations disappear, the
Deployment's own labels follow a new `modelRef`, and `replicas` is left out when an HPA owns the
count. Tolerations and the node selector apply to every service, not only GPU ones.
"""

from dataclasses import dataclass

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceService, InferenceServiceSpec
from llmkube.plan.apiserver.merge_keys import merge_by_key
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.drain import DrainHook
from llmkube.plan.inferenceservice.gpu import gpu_toleration
from llmkube.plan.inferenceservice.hardening import (
    NON_ROOT_USER,
    home_env,
    memory_limit,
    writable_mounts,
    writable_volumes,
)
from llmkube.plan.inferenceservice.names import managed, selector_labels, workload_labels
from llmkube.plan.inferenceservice.objects import compact, fresh_copy, object_metadata, owner_reference
from llmkube.plan.inferenceservice.probes import container_probes
from llmkube.plan.inferenceservice.resources import container_resources
from llmkube.plan.inferenceservice.runtimes import ContainerProcess, RuntimeDefaults
from llmkube.plan.inferenceservice.storage import ModelStorage

PORT_NAME = "http"
# The strategy is spelled out in full (the server's own RollingUpdate default for CPU services): we
# own the whole block, so switching to Recreate removes `rollingUpdate`, which the server refuses
# next to Recreate (see controllers/apply_policies.py).
ROLLING_UPDATE_STRATEGY: KubeObject = {
    "type": "RollingUpdate",
    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
}
# The old pod must release its GPU before the new one can be scheduled.
RECREATE_STRATEGY: KubeObject = {"type": "Recreate"}
DEFAULT_CONTAINER_SECURITY_CONTEXT: KubeObject = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}


@dataclass(frozen=True)
class WorkloadInputs:
    isvc: InferenceService
    runtime: RuntimeDefaults
    process: ContainerProcess
    storage: ModelStorage
    port: int
    gpu_count: int
    gpu_resource: str
    image: str  # spec.image, else the runtime's default for this hardware (images.py)
    priority_class_name: str
    replicas: int | None  # None: an HPA owns the count, so we do not apply it
    config: OperatorConfig
    #: the preStop hook that drains a pod before it stops (`inference.llmkube.dev/rollout: drain`)
    drain: DrainHook | None = None
    #: the taint key GPU pods tolerate (the Model's tolerationKey, else the resource name)
    toleration_key: str = ""
    #: the Model's DRA claims (pod resourceClaims), named by the container instead of `gpu_resource`
    resource_claims: tuple[KubeObject, ...] = ()


def recreates(gpu_count: int) -> bool:
    """A GPU service's old pod must release its GPU before the new one can be scheduled."""
    return gpu_count > 0


def container_port(spec: InferenceServiceSpec, runtime: RuntimeDefaults) -> int:
    """containerPort, else the endpoint port, else the runtime's own default."""
    if spec.container_port:
        return spec.container_port
    if spec.endpoint is not None and spec.endpoint.port:
        return spec.endpoint.port
    return runtime.default_port


def stored_env_var(var: KubeObject) -> KubeObject:
    """The variable as the API server stores it, so that what we apply compares equal to what is
    stored (otherwise every reconcile costs a write): an empty `value` is omitted (omitempty), and
    a `fieldRef` gets the server's default `apiVersion: v1` (the selector is an atomic struct, so
    the defaulted field counts as ours). Both mean the same to the container."""
    stored = {key: value for key, value in var.items() if not (key == "value" and value == "")}
    value_from = stored.get("valueFrom")
    if isinstance(value_from, dict) and isinstance(value_from.get("fieldRef"), dict):
        field_ref = value_from["fieldRef"]
        if not field_ref.get("apiVersion"):
            stored["valueFrom"] = {**value_from, "fieldRef": {**field_ref, "apiVersion": "v1"}}
    return stored


def deployment_intent(inputs: WorkloadInputs) -> KubeObject:
    """A fresh object: the user's sub-objects (env, probes, security contexts...) are copied, so a
    caller that edits the intent can never change the InferenceService it came from."""
    isvc = inputs.isvc
    name, spec = isvc.metadata.name or "", isvc.spec
    labels = workload_labels(name, spec.model_ref, inputs.runtime.name)
    template_metadata = compact(
        {
            "labels": {**(spec.pod_labels or {}), **labels},  # ours win on a collision
            "annotations": dict(spec.pod_annotations or {}),
        }
    )
    intent: KubeObject = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_metadata(
            name, isvc.metadata.namespace or "", managed(labels), owner_reference(isvc)
        ),
        "spec": compact(
            {
                "replicas": inputs.replicas,
                "revisionHistoryLimit": spec.revision_history_limit,
                "selector": {"matchLabels": selector_labels(name)},
                "strategy": RECREATE_STRATEGY if recreates(inputs.gpu_count) else ROLLING_UPDATE_STRATEGY,
                "template": {"metadata": template_metadata, "spec": pod_spec(inputs)},
            }
        ),
    }
    return fresh_copy(intent)  # type: ignore[no-any-return]


def pod_spec(inputs: WorkloadInputs) -> KubeObject:
    spec = inputs.isvc.spec
    # The user's tolerations and nodeSelector apply to every service, GPU or not (the reference
    # operator dropped them for CPU services).
    # (Tolerations are an atomic list, not keyed: a toleration listed twice is legal.)
    gpu_taint = inputs.toleration_key or inputs.gpu_resource
    tolerations = [gpu_toleration(gpu_taint)] if inputs.gpu_count > 0 or inputs.resource_claims else []
    tolerations += spec.tolerations or []
    return compact(
        {
            "securityContext": pod_security_context(spec, inputs.config, inputs.runtime),
            "initContainers": list(inputs.storage.init_containers),
            "containers": [main_container(inputs)],
            # The user's volumes after ours (v0.9 extraVolumes; held to the admin's volume rules:
            # plan/inferenceservice/policy.py).
            "volumes": [
                *inputs.storage.volumes,
                *writable_volumes(inputs.runtime.writable_dirs),
                *(spec.extra_volumes or []),
            ],
            # No runtime talks to the Kubernetes API (plan/inferenceservice/hardening.py).
            "automountServiceAccountToken": False,
            "priorityClassName": inputs.priority_class_name,
            "runtimeClassName": spec.runtime_class_name or None,
            "imagePullSecrets": spec.image_pull_secrets,
            # vLLM reads VLLM_* variables; Kubernetes service links would inject VLLM_PORT and the like.
            "enableServiceLinks": False if inputs.runtime.name == "vllm" else None,
            "tolerations": tolerations,
            "nodeSelector": spec.node_selector,
            # v0.9 passthroughs, held to the admin's placement rules (policy.py).
            "affinity": spec.affinity,
            "topologySpreadConstraints": spec.topology_spread_constraints,
            "resourceClaims": list(inputs.resource_claims),
            # The hook's wait, then the server's own stop (else the server's default of 30 s).
            "terminationGracePeriodSeconds": inputs.drain.grace_seconds if inputs.drain else None,
        }
    )


def pod_security_context(
    spec: InferenceServiceSpec, config: OperatorConfig, runtime: RuntimeDefaults
) -> KubeObject:
    """The user's verbatim when given; else RuntimeDefault seccomp and the operator's fsGroup, so the
    non-root downloader can write the model volume, and, for the runtimes whose images we know, a
    non-root user: with the container defaults that meets Pod Security "restricted"
    (plan/inferenceservice/hardening.py)."""
    if spec.pod_security_context is not None:
        return spec.pod_security_context
    user = NON_ROOT_USER if runtime.writable_dirs else None
    return compact(
        {
            "runAsNonRoot": True if user is not None else None,
            "runAsUser": user,
            "runAsGroup": user,
            "seccompProfile": {"type": "RuntimeDefault"},
            "fsGroup": config.default_fsgroup if config.default_fsgroup > 0 else None,
        }
    )


def default_security(runtime: RuntimeDefaults) -> KubeObject:
    """No privilege escalation, no capabilities; a read-only root where we know what the image
    writes (plan/inferenceservice/hardening.py)."""
    if not runtime.writable_dirs:
        return DEFAULT_CONTAINER_SECURITY_CONTEXT
    return {**DEFAULT_CONTAINER_SECURITY_CONTEXT, "readOnlyRootFilesystem": True}


def main_container(inputs: WorkloadInputs) -> KubeObject:
    spec, runtime, process = inputs.isvc.spec, inputs.runtime, inputs.process
    command = spec.command or (list(process.command) if process.command else None)
    security = spec.security_context if spec.security_context is not None else default_security(runtime)
    return compact(
        {
            "name": runtime.container_name,
            "image": inputs.image,
            "command": command,
            "args": list(process.args) if process.args is not None else None,
            "ports": [{"name": PORT_NAME, "containerPort": inputs.port, "protocol": "TCP"}],
            # Merged by name (the API keys env by it): a user variable replaces the generated one of
            # the same name; the generated ones come first.
            "env": [
                stored_env_var(var)
                for var in merge_by_key([*home_env(runtime.writable_dirs), *process.env], spec.env or [])
            ],
            "resources": container_resources(
                spec.resources,
                0 if inputs.resource_claims else inputs.gpu_count,
                inputs.gpu_resource,
                memory_limit(spec.resources, inputs.isvc.metadata.annotations).quantity,
                claims=[claim["name"] for claim in inputs.resource_claims if claim.get("name")],
            ),
            "volumeMounts": [
                *inputs.storage.mounts,
                *writable_mounts(runtime.writable_dirs),
                *(spec.extra_volume_mounts or []),
            ],
            "securityContext": security,
            # A crashing server's last log lines land in its status (lastState.terminated.message),
            # where the controller reads why it stopped without any right to read logs.
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "lifecycle": inputs.drain.lifecycle() if inputs.drain else None,
            **container_probes(runtime.probe, inputs.port, spec.probe_overrides, runtime.probe_paths),
        }
    )
