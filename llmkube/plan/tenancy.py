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
- volumes a spec adds (v0.9 `extraVolumes`): the types of Pod Security "restricted" (configMap,
  csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret) unless
  `--allowed-volume-types` lists more; a projected ServiceAccount token only when it lists
  `serviceAccountToken`; hostPath as below, whatever the list says;
- placement (v0.9 `affinity`, and `nodeSelector`): never on control-plane nodes unless
  `--allow-control-plane-placement`;
- host paths: a local model source becomes a hostPath volume, allowed only for a path inside
  `--model-local-roots` and only in a namespace labelled
  `inference.llmkube.dev/local-model-sources=allowed`. The check runs on the finished pod template,
  whatever route produced the volume.

Namespaces are cluster-scoped: only whoever may label them (a cluster admin, as for Pod Security's
own labels) can loosen these rules for one.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llmkube.api.enums import Priority
from llmkube.plan.apiserver.pod_security import ENFORCE_LABEL, Level, parse_level

POLICY_VIOLATION = "PolicyViolation"
LOCAL_SOURCES_LABEL = "inference.llmkube.dev/local-model-sources"
LOCAL_SOURCES_ALLOWED = "allowed"
MAX_PRIORITY_LABEL = "inference.llmkube.dev/max-priority"
MAX_POD_SECURITY_FLAG = "--max-pod-security"
ALLOWED_PRIORITY_CLASSES_FLAG = "--allowed-priority-classes"
DEFAULT_MAX_PRIORITY_FLAG = "--default-max-priority"
ALLOWED_SERVICE_TYPES_FLAG = "--allowed-service-types"
LOCAL_ROOTS_FLAG = "--model-local-roots"
ALLOWED_VOLUME_TYPES_FLAG = "--allowed-volume-types"
CONTROL_PLANE_FLAG = "--allow-control-plane-placement"
#: the volume types Pod Security "restricted" allows: what a spec may add unless the admin says more
RESTRICTED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
#: the pseudo-type that allows a projected ServiceAccount token in `--allowed-volume-types`
SERVICE_ACCOUNT_TOKEN = "serviceAccountToken"
#: the node labels that mark a control-plane node (kubeadm's, and the older master role)
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


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
    #: volume types extraVolumes may use (and `serviceAccountToken` for projected tokens)
    allowed_volume_types: frozenset[str] = RESTRICTED_VOLUME_TYPES
    #: whether affinity and nodeSelector may select control-plane nodes
    allow_control_plane: bool = False


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


def local_source_refusal(namespace: str, ns: NamespacePolicy) -> str | None:
    """Why a namespace may not use local model sources at all (the roots are checked apart)."""
    if ns.local_sources_allowed:
        return None
    return (
        f"local model sources are not allowed in namespace {namespace!r}: an admin allows them with the "
        f"namespace label {LOCAL_SOURCES_LABEL}={LOCAL_SOURCES_ALLOWED}"
    )
