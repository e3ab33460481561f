"""Which InferenceService field a field of an object we build came from.

The API server names the fields of the object it refuses (`details.causes[].field`, e.g.
`spec.template.spec.containers[0].env[2].name` of a Deployment); the user wrote
`spec.env[0].name` of their InferenceService. `isvc_field` maps the one to the other, so that both
the planner's own checks (plan/apiserver/pod_template_rules.py) and a refusal the planner did not foresee are
reported in the terms of the object the user owns. A field the controller sets itself (a volume,
the init container, the GPU toleration) maps to None: the fault is ours, not the user's.

Lists that mix generated and user entries (env, tolerations) end with the user's, in their order
(plan/inferenceservice/deployment.py), so an index past the generated ones is an index into the user's list.
"""

import re
from collections.abc import Mapping
from typing import Any

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.inferenceservice.runtimes import resolve_runtime

POD = "spec.template.spec"
CONTAINER = f"{POD}.containers[0]"
_TOKEN_CONFIGS = {"vllm": "vllmConfig", "tgi": "tgiConfig", "personaplex": "personaPlexConfig"}
_PROBES = {"livenessProbe": "liveness", "readinessProbe": "readiness", "startupProbe": "startup"}
_INDEXED = re.compile(r"\[(\d+)\](.*)", re.DOTALL)
# autoscaling/v2 metric fields -> the InferenceService's flat metric fields
_METRIC_FIELDS = (
    ("pods.metric.name", ".name"),
    ("pods.target.averageValue", ".targetAverageValue"),
    ("pods.target", ".targetAverageValue"),
    ("resource.name", ".name"),
    ("resource.target.averageUtilization", ".targetAverageUtilization"),
    ("resource.target.averageValue", ".targetAverageValue"),
    ("resource.target", ""),
    ("type", ".type"),
)


def isvc_field(kind: str, path: str, spec: InferenceServiceSpec, sent: KubeObject | None) -> str | None:
    """The InferenceService field that `path` of the `kind` object we sent (`sent`) came from, or
    None when the controller set that field itself."""
    if kind == "Deployment":
        return _deployment_field(path, spec, sent or {})
    if kind == "Service":
        return _service_field(path, spec)
    if kind == "HorizontalPodAutoscaler":
        return _hpa_field(path, spec)
    if path.startswith("metadata"):
        return _metadata_field(path)
    return None


def describe(kind: str, path: str, spec: InferenceServiceSpec, sent: KubeObject | None) -> str:
    """`spec.env[0].name`, or `Deployment spec.template.spec.volumes[0] (set by the controller)`."""
    found = isvc_field(kind, path, spec, sent)
    return found if found is not None else f"{kind} {path or '(object)'} (set by the controller)"


def _under(path: str, prefix: str) -> str | None:
    """The rest of `path` after `prefix` (''), a field (`.x...`) or an index (`[0]...`), else None."""
    if path == prefix:
        return ""
    if path.startswith(prefix) and path[len(prefix)] in ".[":
        return path[len(prefix) :]
    return None


def _user_index(rest: str, total: int, users: int) -> tuple[int, str] | None:
    """`[i]<tail>` of a list whose last `users` of `total` entries are the user's: (user index, tail)."""
    match = _INDEXED.fullmatch(rest)
    if match is None:
        return None
    index, tail = int(match.group(1)), match.group(2)
    offset = total - users
    return (index - offset, tail) if users and offset <= index < total else None


def _length(value: Any) -> int:
    return len(value) if isinstance(value, list) else 0


def _metadata_field(path: str) -> str | None:
    # Our objects' names and labels are the service's name and model: `metadata.name`, or the
    # label value of spec.modelRef (both are checked by the planner; this is the fallback).
    return "spec.modelRef" if "model" in path else "metadata.name"


def _deployment_field(path: str, spec: InferenceServiceSpec, sent: Mapping[str, Any]) -> str | None:
    template = ((sent.get("spec") or {}).get("template")) or {}
    pod = template.get("spec") or {}
    containers = pod.get("containers") or [{}]
    container = containers[0] if isinstance(containers[0], Mapping) else {}
    if path.startswith("metadata"):
        return _metadata_field(path)
    if _under(path, "spec.replicas") is not None:
        return "spec.replicas"
    if (rest := _under(path, "spec.template.labels")) is not None:
        return f"spec.podLabels{rest}"
    if (rest := _under(path, "spec.template.annotations")) is not None:
        return f"spec.podAnnotations{rest}"
    simple = {
        f"{POD}.nodeSelector": "spec.nodeSelector",
        f"{POD}.runtimeClassName": "spec.runtimeClassName",
        f"{POD}.imagePullSecrets": "spec.imagePullSecrets",
        f"{CONTAINER}.image": "spec.image",
        f"{CONTAINER}.command": "spec.command" if spec.command else None,
        f"{CONTAINER}.resources": "spec.resources",
        f"{CONTAINER}.ports": "spec.containerPort" if spec.container_port else "spec.endpoint.port",
        f"{POD}.priorityClassName": "spec.priorityClassName" if spec.priority_class_name else "spec.priority",
        f"{CONTAINER}.args": "spec.args" if spec.args else ("spec.extraArgs" if spec.extra_args else None),
    }
    for prefix, target in simple.items():
        if (rest := _under(path, prefix)) is not None:
            if target is None:
                return None
            # Indexes into lists we build whole (ports, args) do not index the user's field.
            return target if prefix.endswith(("ports", "args", "resources")) else f"{target}{rest}"
    if (rest := _under(path, f"{POD}.securityContext")) is not None:
        return f"spec.podSecurityContext{rest}" if spec.pod_security_context is not None else None
    if (rest := _under(path, f"{CONTAINER}.securityContext")) is not None:
        return f"spec.securityContext{rest}" if spec.security_context is not None else None
    for probe, override in _PROBES.items():
        if (rest := _under(path, f"{CONTAINER}.{probe}")) is not None:
            given = getattr(spec.probe_overrides, override, None) if spec.probe_overrides else None
            return f"spec.probeOverrides.{override}{rest}" if given is not None else None
    if (rest := _under(path, f"{CONTAINER}.env")) is not None:
        found = _user_index(rest, _length(container.get("env")), len(spec.env or []))
        if found:
            return f"spec.env[{found[0]}]{found[1]}"
        # A generated variable reading a Secret: the runtime's hfTokenSecretRef.
        secret = re.fullmatch(r"\[\d+\]\.valueFrom\.secretKeyRef(.*)", rest, re.DOTALL)
        config = _TOKEN_CONFIGS.get(resolve_runtime(spec))
        return f"spec.{config}.hfTokenSecretRef{secret.group(1)}" if secret and config else None
    if (rest := _under(path, f"{POD}.tolerations")) is not None:
        found = _user_index(rest, _length(pod.get("tolerations")), len(spec.tolerations or []))
        return f"spec.tolerations[{found[0]}]{found[1]}" if found else None
    return None


def _service_field(path: str, spec: InferenceServiceSpec) -> str | None:
    if path.startswith("metadata"):
        return _metadata_field(path)
    if _under(path, "spec.type") is not None:
        return "spec.endpoint.type"
    if (rest := _under(path, "spec.ports")) is not None and rest.endswith((".port", "port")):
        return "spec.endpoint.port"
    return None


def _hpa_field(path: str, spec: InferenceServiceSpec) -> str | None:
    if path.startswith("metadata"):
        return _metadata_field(path)
    for field in ("minReplicas", "maxReplicas"):
        if _under(path, f"spec.{field}") is not None:
            return f"spec.autoscaling.{field}"
    rest = _under(path, "spec.metrics")
    metrics = spec.autoscaling.metrics if spec.autoscaling else None
    if rest is None or not metrics:
        return None
    match = _INDEXED.fullmatch(rest)
    if match is None:
        return "spec.autoscaling.metrics"
    index, tail = match.group(1), match.group(2).lstrip(".")
    for theirs, ours in _METRIC_FIELDS:
        if tail == theirs or tail.startswith(f"{theirs}."):
            return f"spec.autoscaling.metrics[{index}]{ours}"
    return f"spec.autoscaling.metrics[{index}]"
