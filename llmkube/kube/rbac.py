"""A process's API calls as RBAC permissions: the data its Roles and ClusterRoles are written from
(controller-gen's `+kubebuilder:rbac` markers, as a list a test can hold the process to).

Each process keeps one list of `Permission`s (the controller's `llmkube.controllers.permissions`,
the host agent's `llmkube.agent.permissions`); `hack/gen-install-files.py` writes the roles from
them, and the tests fail on a request the list does not grant, and on a verb it grants that nobody
uses.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from llmkube.kube.resource import Resource

__all__ = ["VERB_ORDER", "Permission", "Scope"]

#: RBAC's usual order, so generated rules read the same everywhere.
VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


class Scope(enum.Enum):
    #: cluster-scoped kinds: always a ClusterRole
    CLUSTER = "cluster"
    #: namespaced kinds in the namespaces the process watches: a ClusterRole for a cluster-wide
    #: install, a Role in the watched namespace for a namespace-scoped one
    WATCHED = "watched"
    #: the leader-election Lease, in the process's own namespace
    LEASE = "lease"
    #: other objects of the controller's own namespace (a Role there)
    OWN_NAMESPACE = "own-namespace"


@dataclass(frozen=True)
class Permission:
    resource: Resource
    verbs: tuple[str, ...]
    scope: Scope
    #: why the process needs it (written into the generated role as a comment)
    why: str
    subresource: str = ""
    #: only for a role of its own that an install may leave out (the controller's
    #: --manage-priority-classes=true: the priorityclass-writer role)
    manages_priority_classes: bool = False
    #: only these objects (RBAC's resourceNames; list and watch then need a metadata.name field
    #: selector, and create cannot be limited so: it names no object)
    resource_names: tuple[str, ...] = ()
    #: held only to grant it (Kubernetes lets no one grant what they do not hold): the process
    #: itself never makes the call, a Role it writes for another does
    grant_only: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.verbs) - set(VERB_ORDER)
        if unknown:
            raise ValueError(f"unknown verbs {sorted(unknown)} for {self.rbac_resource}")
        if self.resource_names and {"create", "deletecollection"} & set(self.verbs):
            raise ValueError(f"create and deletecollection cannot be limited by name ({self.rbac_resource})")

    @property
    def rbac_resource(self) -> str:
        return f"{self.resource.plural}/{self.subresource}" if self.subresource else self.resource.plural

    def rule(self) -> dict[str, list[str]]:
        return {
            "apiGroups": [self.resource.group],
            "resources": [self.rbac_resource],
            **({"resourceNames": list(self.resource_names)} if self.resource_names else {}),
            "verbs": [verb for verb in VERB_ORDER if verb in self.verbs],
        }
