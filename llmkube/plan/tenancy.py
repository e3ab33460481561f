"""What an administrator allows the tenants of a cluster, and the checks that hold every plan to it.

Creating an InferenceService is, like creating a Deployment, a way to create pods: the controller
turns a tenant's spec into pods under its own (much larger) rights. So everything a spec names that
reaches further than the tenant's own namespace is checked here against what an admin allowed, and
a spec that asks for more is `Failed` with `Degraded=True/PolicyViolation`, naming the field and the
rule, before anything is applied (docs/security.md):

- Pod Security: the pod must meet both the namespace's `pod-security.kubernetes.io/enforce` level
  (the API server would refuse it otherwise, over and over) and the cluster's maximum
  (`--max-pod-security`, default `baseline`);
- PriorityClasses: the controller's own `llmkube-*` classes and those in
  `--allowed-priority-classes`; `system-*` never; at most the namespace's ceiling (the label
  `inference.llmkube.dev/max-priority`, else `--default-max-priority`);
- Service types: `ClusterIP` unless `--allowed-service-types` lists more;
- host paths: a local model source becomes a hostPath volume, allowed only for a path inside
  `--model-local-roots` and only in a namespace labelled
  `inference.llmkube.dev/local-model-sources=allowed`. The check runs on the finished pod template,
  whatever route produced the volume.

Namespaces are cluster-scoped: only whoever may label them (a cluster admin, as for Pod Security's
own labels) can loosen these rules for one.
"""

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec, Priority, ServiceType
from llmkube.plan.field_origins import describe
from llmkube.plan.pod_security import ENFORCE_LABEL, Level, parse_level, violations
from llmkube.plan.priority import PRIORITY_CLASSES, is_llmkube_class

POLICY_VIOLATION = "PolicyViolation"
LOCAL_SOURCES_LABEL = "inference.llmkube.dev/local-model-sources"
LOCAL_SOURCES_ALLOWED = "allowed"
MAX_PRIORITY_LABEL = "inference.llmkube.dev/max-priority"
MAX_POD_SECURITY_FLAG = "--max-pod-security"
ALLOWED_PRIORITY_CLASSES_FLAG = "--allowed-priority-classes"
DEFAULT_MAX_PRIORITY_FLAG = "--default-max-priority"
ALLOWED_SERVICE_TYPES_FLAG = "--allowed-service-types"
LOCAL_ROOTS_FLAG = "--model-local-roots"
PRIORITIES: tuple[Priority, ...] = get_args(Priority)
SERVICE_TYPES: tuple[ServiceType, ...] = get_args(ServiceType)
_CLASS_VALUES = {pc.priority: pc.value for pc in PRIORITY_CLASSES}
#: the volume the storage planner mounts a local model source from (plan/storage.py)
HOST_MODEL_VOLUME = "host-model"


@dataclass(frozen=True)
class TenancyPolicy:
    """The administrator's allowances, from the controller's flags."""

    max_pod_security: Level = "baseline"
    #: PriorityClasses a spec may name besides the five llmkube-* ones
    allowed_priority_classes: frozenset[str] = frozenset()
    #: the ceiling of a namespace without the max-priority label
    default_max_priority: Priority = "critical"
    allowed_service_types: frozenset[str] = frozenset({"ClusterIP"})
    #: directories local model sources may come from (normalized; none: local sources refused)
    local_source_roots: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class NamespacePolicy:
    """What a namespace's labels allow; `known` is False while the namespace is not in the cache
    (then nothing is loosened, and Pod Security is left to the API server)."""

    known: bool = False
    enforce: Level | None = None
    local_sources_allowed: bool = False
    #: the max-priority label as written ("" when absent)
    max_priority: str = ""


def namespace_policy(namespace: Mapping[str, Any] | None) -> NamespacePolicy:
    if namespace is None:
        return NamespacePolicy()
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    return NamespacePolicy(
        known=True,
        enforce=parse_level(labels.get(ENFORCE_LABEL)),
        local_sources_allowed=labels.get(LOCAL_SOURCES_LABEL) == LOCAL_SOURCES_ALLOWED,
        max_priority=str(labels.get(MAX_PRIORITY_LABEL) or ""),
    )


#: The labels a namespace policy reads: a namespace change that touches none of them changes nothing.
POLICY_LABELS = (ENFORCE_LABEL, LOCAL_SOURCES_LABEL, MAX_PRIORITY_LABEL)


@dataclass(frozen=True)
class PolicyIssue:
    field: str
    message: str

    def text(self) -> str:
        return f"{self.field}: {self.message}"


# --- local sources --------------------------------------------------------------------------------


def local_source_refusal(namespace: str, ns: NamespacePolicy) -> str | None:
    """Why a namespace may not use local model sources at all (the roots are checked apart)."""
    if ns.local_sources_allowed:
        return None
    return (
        f"local model sources are not allowed in namespace {namespace!r}: an admin allows them with the "
        f"namespace label {LOCAL_SOURCES_LABEL}={LOCAL_SOURCES_ALLOWED}"
    )


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
        field_name = "model.spec.source" if volume.get("name") == HOST_MODEL_VOLUME else "hostPath"
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
    for index, volume in enumerate(volumes):
        if volume.get("name") == HOST_MODEL_VOLUME and path.startswith(
            f"spec.template.spec.volumes[{index}]"
        ):
            return "model.spec.source"
    if path.startswith("spec.template.metadata.annotations"):
        return "spec.podAnnotations" + path.removeprefix("spec.template.metadata.annotations")
    if path.startswith("spec.template.spec.initContainers"):
        # The model downloader runs as the pod's user and group (plan/storage.py).
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
