"""The checks that hold an InferenceService's plan to what the admin allows (plan/tenancy.py says
what that is and where it comes from): the spec's PriorityClass and Service type, the volumes it
adds and where it places pods (v0.9 extraVolumes, affinity), and, on the finished pod template
whatever route built it, its host paths and its Pod Security level."""

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any, get_args

from llmkube.api.base import KubeObject
from llmkube.api.enums import Priority, ServiceType
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.apiserver.pod_security import ENFORCE_LABEL, Level, violations
from llmkube.plan.inferenceservice.field_origins import describe
from llmkube.plan.inferenceservice.priority import PRIORITY_CLASSES, is_llmkube_class
from llmkube.plan.tenancy import (
    ALLOWED_PRIORITY_CLASSES_FLAG,
    ALLOWED_SERVICE_TYPES_FLAG,
    ALLOWED_VOLUME_TYPES_FLAG,
    CONTROL_PLANE_FLAG,
    CONTROL_PLANE_LABELS,
    DEFAULT_MAX_PRIORITY_FLAG,
    LOCAL_ROOTS_FLAG,
    MAX_POD_SECURITY_FLAG,
    MAX_PRIORITY_LABEL,
    SERVICE_ACCOUNT_TOKEN,
    NamespacePolicy,
    PolicyIssue,
    TenancyPolicy,
    local_source_refusal,
)

PRIORITIES: tuple[Priority, ...] = get_args(Priority)
SERVICE_TYPES: tuple[ServiceType, ...] = get_args(ServiceType)
_CLASS_VALUES = {pc.priority: pc.value for pc in PRIORITY_CLASSES}
#: the volume the storage planner mounts a local model source from (plan/inferenceservice/storage.py)
HOST_MODEL_VOLUME = "host-model"


def _inside(path: str, roots: Sequence[str]) -> bool:
    if not path.startswith("/") or any(part in (".", "..") for part in path.split("/")):
        return False
    normal = "/" + posixpath.normpath(path).lstrip("/")
    return any(root == "/" or normal == root or normal.startswith(root + "/") for root in roots)


def host_path_issues(
    template: Mapping[str, Any], namespace: str, policy: TenancyPolicy, ns: NamespacePolicy
) -> list[PolicyIssue]:
    """Every hostPath volume in a finished pod template must be a local model source the admin
    allowed: inside the roots, in a namespace that may use them. The last check before a pod
    template leaves the planner, whatever produced the volume."""
    volumes = (template.get("spec") or {}).get("volumes") or []
    issues = []
    for volume in volumes:
        host_path = volume.get("hostPath") if isinstance(volume, Mapping) else None
        if host_path is None:
            continue
        path = str((host_path or {}).get("path") or "")
        field_name = "model.spec.source" if volume.get("name") == HOST_MODEL_VOLUME else "spec.extraVolumes"
        if not policy.local_source_roots:
            issues.append(
                PolicyIssue(
                    field_name,
                    f"host path {path!r} is not allowed: local model sources are disabled "
                    f"({LOCAL_ROOTS_FLAG} is empty)",
                )
            )
        elif not _inside(path, policy.local_source_roots):
            issues.append(
                PolicyIssue(
                    field_name,
                    f"host path {path!r} is not allowed: it is outside the directories local models may "
                    f"come from ({LOCAL_ROOTS_FLAG}: {', '.join(policy.local_source_roots)})",
                )
            )
        elif (refusal := local_source_refusal(namespace, ns)) is not None:
            issues.append(PolicyIssue(field_name, refusal))
    return issues


# --- Pod Security ----------------------------------------------------------------------------------


def pod_security_issues(
    deployment: KubeObject,
    spec: InferenceServiceSpec,
    namespace: str,
    policy: TenancyPolicy,
    ns: NamespacePolicy,
) -> list[PolicyIssue]:
    """What the pod template does beyond the cluster's maximum and the namespace's enforced level.

    The cluster maximum judges what the tenant asked for: the hostPath of a local model source the
    admin allowed (roots and namespace label, above) is judged by that allowance, not by the
    maximum, which would otherwise have to be `privileged` (privileged containers, every capability)
    for a read-only file. The namespace's own level judges the whole pod, as the API server will."""
    template = (deployment.get("spec") or {}).get("template") or {}
    allowed_local = not host_path_issues(template, namespace, policy, ns)
    judged = _without_host_model(template) if allowed_local else template
    checks: list[tuple[Mapping[str, Any], Level, str]] = [
        (judged, policy.max_pod_security, f"the controller's {MAX_POD_SECURITY_FLAG}")
    ]
    if ns.enforce is not None:
        checks.append((template, ns.enforce, f"namespace {namespace!r}'s {ENFORCE_LABEL} label"))
    issues: dict[tuple[str, str], PolicyIssue] = {}
    for checked, level, who in checks:
        for violation in violations(checked, level):
            for path in violation.paths:
                field_name = _origin(path, spec, deployment)
                issues.setdefault(
                    (field_name, violation.check),
                    PolicyIssue(
                        field_name,
                        f'Pod Security "{level}" ({who}) forbids {violation.reason}: {violation.detail}',
                    ),
                )
    return list(issues.values())


def _without_host_model(template: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = template.get("spec") or {}
    volumes = [
        v
        for v in spec.get("volumes") or []
        if not (isinstance(v, Mapping) and v.get("name") == HOST_MODEL_VOLUME)
    ]
    return {**template, "spec": {**spec, "volumes": volumes}}


def _origin(path: str, spec: InferenceServiceSpec, deployment: KubeObject) -> str:
    """The InferenceService field a pod-template path came from; a volume or container the
    controller made for the model points at the Model's source, anything else of ours says so."""
    volumes = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes") or []
    extra = [str(v.get("name") or "") for v in spec.extra_volumes or []]
    for index, volume in enumerate(volumes):
        prefix = f"spec.template.spec.volumes[{index}]"
        if not path.startswith(prefix):
            continue
        if volume.get("name") == HOST_MODEL_VOLUME:
            return "model.spec.source"
        if volume.get("name") in extra:  # the user's own (v0.9 extraVolumes)
            return f"spec.extraVolumes[{extra.index(volume['name'])}]" + path.removeprefix(prefix)
    if path.startswith("spec.template.metadata.annotations"):
        return "spec.podAnnotations" + path.removeprefix("spec.template.metadata.annotations")
    if path.startswith("spec.template.spec.initContainers"):
        # The model downloader runs as the pod's user and group (plan/inferenceservice/storage.py).
        return (
            "spec.podSecurityContext" if spec.pod_security_context is not None else "spec (model downloader)"
        )
    return describe("Deployment", path, spec, deployment)


# --- PriorityClasses -------------------------------------------------------------------------------


def ceiling(policy: TenancyPolicy, ns: NamespacePolicy, namespace: str) -> tuple[int, str]:
    """The highest priority value a service in this namespace may have, and the rule that says so.
    A label with an unknown value allows nothing above `batch`: a ceiling an admin meant to set is
    never read as none."""
    label = ns.max_priority
    if label:
        if label in _CLASS_VALUES:
            return _CLASS_VALUES[
                label
            ], f'namespace {namespace!r} allows at most "{label}" ({MAX_PRIORITY_LABEL})'
        return _CLASS_VALUES["batch"], (
            f"namespace {namespace!r} has an unknown {MAX_PRIORITY_LABEL} label {label!r} (one of "
            f"{', '.join(PRIORITIES)}), so only batch is allowed"
        )
    default = policy.default_max_priority
    return _CLASS_VALUES[default], f'the cluster allows at most "{default}" ({DEFAULT_MAX_PRIORITY_FLAG})'


def priority_issues(
    spec: InferenceServiceSpec,
    class_name: str,
    value: int | None,
    namespace: str,
    policy: TenancyPolicy,
    ns: NamespacePolicy,
) -> list[PolicyIssue]:
    custom = bool(spec.priority_class_name)
    field_name = "spec.priorityClassName" if custom else "spec.priority"
    if class_name.startswith("system-"):
        return [
            PolicyIssue(
                field_name,
                f'PriorityClass "{class_name}" is not allowed: system-* classes are reserved for the '
                "cluster's own components",
            )
        ]
    if custom and not is_llmkube_class(class_name) and class_name not in policy.allowed_priority_classes:
        allowed = ", ".join(sorted(policy.allowed_priority_classes)) or "none"
        return [
            PolicyIssue(
                field_name,
                f'PriorityClass "{class_name}" is not allowed: services use the llmkube-* classes and '
                f"those listed in {ALLOWED_PRIORITY_CLASSES_FLAG} ({allowed})",
            )
        ]
    if value is None:
        return []  # a class that does not exist is reported by the validation
    highest, rule = ceiling(policy, ns, namespace)
    if value > highest:
        shown = f'PriorityClass "{class_name}"' if custom else f'"{spec.priority or "normal"}"'
        return [PolicyIssue(field_name, f"{shown} (value {value}) is above what is allowed here: {rule}")]
    return []


# --- Service types ---------------------------------------------------------------------------------


def service_type_issues(spec: InferenceServiceSpec, policy: TenancyPolicy) -> list[PolicyIssue]:
    wanted = (spec.endpoint.type if spec.endpoint else None) or "ClusterIP"
    pinned = spec.endpoint.node_port if spec.endpoint else None
    if pinned is not None and "NodePort" not in policy.allowed_service_types:
        # A pinned port on every node is what NodePort allows (a LoadBalancer's own is the cloud's).
        allowed = ", ".join(t for t in SERVICE_TYPES if t in policy.allowed_service_types)
        return [
            PolicyIssue(
                "spec.endpoint.nodePort",
                f"a node port ({pinned}) is not allowed: this cluster allows {allowed} Services, not "
                f"NodePort ({ALLOWED_SERVICE_TYPES_FLAG})",
            )
        ]
    if wanted in policy.allowed_service_types:
        return []
    allowed = ", ".join(t for t in SERVICE_TYPES if t in policy.allowed_service_types)
    return [
        PolicyIssue(
            "spec.endpoint.type",
            f'Service type "{wanted}" is not allowed: this cluster allows {allowed} '
            f"({ALLOWED_SERVICE_TYPES_FLAG})",
        )
    ]


# --- Volumes a spec adds (v0.9 extraVolumes) ---------------------------------------------------------


def volume_type(volume: Mapping[str, Any]) -> str:
    """The source a Volume names (`emptyDir`, `nfs`, ...): its one key besides `name`."""
    return next((key for key in volume if key != "name"), "")


def extra_volume_issues(spec: InferenceServiceSpec, policy: TenancyPolicy) -> list[PolicyIssue]:
    """Each extra volume's type must be one the admin allows (hostPath: judged by the local-source
    rules on the finished pod, `host_path_issues`); a projected ServiceAccount token only where
    the admin lists `serviceAccountToken`: the runtimes never talk to the API server, so a token
    in a tenant's pod is a credential of the namespace's ServiceAccount handed to the tenant's code."""
    issues = []
    allowed = policy.allowed_volume_types
    for index, volume in enumerate(spec.extra_volumes or []):
        field_name = f"spec.extraVolumes[{index}]"
        kind = volume_type(volume)
        if kind == "hostPath":
            continue
        if kind not in allowed:
            listed = ", ".join(sorted(allowed - {SERVICE_ACCOUNT_TOKEN})) or "none"
            issues.append(
                PolicyIssue(
                    f"{field_name}.{kind}",
                    f'volume type "{kind}" is not allowed: this cluster allows {listed} '
                    f"({ALLOWED_VOLUME_TYPES_FLAG})",
                )
            )
            continue
        sources = (volume.get("projected") or {}).get("sources") or [] if kind == "projected" else []
        for position, source in enumerate(sources):
            if (
                isinstance(source, Mapping)
                and "serviceAccountToken" in source
                and SERVICE_ACCOUNT_TOKEN not in allowed
            ):
                issues.append(
                    PolicyIssue(
                        f"{field_name}.projected.sources[{position}].serviceAccountToken",
                        "a projected ServiceAccount token is not allowed: the runtimes need none, and it "
                        f"would hand the namespace's ServiceAccount to the pod ({ALLOWED_VOLUME_TYPES_FLAG} "
                        f"lists {SERVICE_ACCOUNT_TOKEN} where it is allowed)",
                    )
                )
    return issues


# --- Placement (v0.9 affinity, and nodeSelector) ----------------------------------------------------


def _selects_control_plane(requirements: Any) -> bool:
    """A node selector requirement list that can only match, or prefers, control-plane nodes:
    one of their role labels with In or Exists (or a value that names them)."""
    for requirement in requirements or []:
        if not isinstance(requirement, Mapping) or requirement.get("key") not in CONTROL_PLANE_LABELS:
            continue
        if requirement.get("operator") in ("In", "Exists"):
            return True
    return False


def placement_issues(spec: InferenceServiceSpec, policy: TenancyPolicy) -> list[PolicyIssue]:
    """Pods on control-plane nodes share them with the API server and etcd: a spec may ask for
    them (by their role labels, in affinity or nodeSelector) only where the admin allows it."""
    if policy.allow_control_plane:
        return []
    found: list[str] = [
        f"spec.nodeSelector[{key}]" for key in (spec.node_selector or {}) if key in CONTROL_PLANE_LABELS
    ]
    node = (spec.affinity or {}).get("nodeAffinity") or {}
    required = (node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms"
    ) or []
    for index, term in enumerate(required):
        if isinstance(term, Mapping) and _selects_control_plane(term.get("matchExpressions")):
            found.append(
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                f".nodeSelectorTerms[{index}]"
            )
    for index, preferred in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        term = preferred.get("preference") if isinstance(preferred, Mapping) else None
        if isinstance(term, Mapping) and _selects_control_plane(term.get("matchExpressions")):
            found.append(
                f"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{index}].preference"
            )
    return [
        PolicyIssue(
            path,
            "selects control-plane nodes, which this cluster keeps for its own components "
            f"({CONTROL_PLANE_FLAG} allows it)",
        )
        for path in found
    ]
