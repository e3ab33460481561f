"""Every API call the controller makes, as RBAC permissions (`llmkube.kube.rbac`): the one list its
roles are made from.

`hack/gen-install-files.py` writes the controller's RBAC (manifests/rbac, the namespace-scoped
component, the chart's copies) from `PERMISSIONS`, and the tests hold the list to what the
controller really does: every request it makes must be granted here (the e2e suite counts them by
verb and resource), and every verb granted here must be used (a scenario on the real control plane
exercises each one and fails on a verb nobody used). Add a call, add it here; stop making one,
take it out.
"""

from __future__ import annotations

from collections.abc import Iterable

from llmkube.controllers.resources import (
    DEPLOYMENTS,
    ENDPOINT_SLICES,
    GPU_QUOTAS,
    HORIZONTAL_POD_AUTOSCALERS,
    INFERENCE_SERVICES,
    JOBS,
    MODEL_ROUTERS,
    MODELS,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    PRIORITY_CLASSES,
    ROLE_BINDINGS,
    ROLES,
    RUNTIME_CLASSES,
    SERVICE_ACCOUNTS,
    SERVICE_CIDRS,
    SERVICES,
)
from llmkube.kube.rbac import Permission, Scope
from llmkube.kube.resource import CONFIG_MAPS, EVENTS, LEASES, SECRETS
from llmkube.plan.inferenceservice.metal_services import METAL_SERVICES_CONFIGMAP
from llmkube.plan.inferenceservice.server_key import MASTER_SECRET

__all__ = ["PERMISSIONS", "granted", "rules"]

_OWNED_WHY = (
    "owned {kind}s, cached by label: get before creating one (never take over an object someone else "
    "made), server-side apply (patch; create when missing)"
)

PERMISSIONS: tuple[Permission, ...] = (
    Permission(INFERENCE_SERVICES, ("list", "watch"), Scope.WATCHED, "the primary objects, from the cache"),
    Permission(
        INFERENCE_SERVICES, ("patch",), Scope.WATCHED, "status, by server-side apply", subresource="status"
    ),
    # Held to grant them to a router's pods (plan/router/permissions.py: scale to zero wakes a
    # backend and shares its last request); the controller makes neither call itself.
    Permission(
        INFERENCE_SERVICES,
        ("patch",),
        Scope.WATCHED,
        "granted to routers: the last-request annotation of their InferenceService backends",
        grant_only=True,
    ),
    Permission(
        DEPLOYMENTS,
        ("get", "patch"),
        Scope.WATCHED,
        "granted to routers: wake a sleeping backend (its Deployment's scale from 0 to 1)",
        subresource="scale",
        grant_only=True,
    ),
    Permission(MODELS, ("list", "watch"), Scope.WATCHED, "Models, from the cache"),
    Permission(MODELS, ("patch",), Scope.WATCHED, "status, by server-side apply", subresource="status"),
    Permission(MODEL_ROUTERS, ("list", "watch"), Scope.WATCHED, "ModelRouters, from the cache"),
    Permission(
        MODEL_ROUTERS, ("patch",), Scope.WATCHED, "status, by server-side apply", subresource="status"
    ),
    Permission(
        GPU_QUOTAS, ("list", "watch"), Scope.WATCHED, "GPUQuotas, from the cache: the GPU queue enforces them"
    ),
    Permission(GPU_QUOTAS, ("patch",), Scope.WATCHED, "status, by server-side apply", subresource="status"),
    # A router's pod runs as a ServiceAccount of its own, bound to a Role made from
    # plan/router/permissions.py: the controller may only grant what it holds itself (modelrouters
    # and endpointslices list/watch, both above), so it needs neither `bind` nor `escalate`.
    *(
        Permission(
            resource,
            ("get", "list", "watch", "create", "patch"),
            Scope.WATCHED,
            f"each ModelRouter's {resource.kind}, cached by label: get before creating one (never take "
            "over an object someone else made), server-side apply (the garbage collector deletes it "
            "with its router)",
        )
        for resource in (SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS)
    ),
    Permission(
        DEPLOYMENTS,
        ("get", "list", "watch", "create", "patch", "delete"),
        Scope.WATCHED,
        _OWNED_WHY.format(kind="Deployment")
        + "; delete when no longer wanted (a host agent serves the service) or when its immutable "
        "selector must change",
    ),
    Permission(
        SERVICES,
        ("get", "list", "watch", "create", "patch"),
        Scope.WATCHED,
        _OWNED_WHY.format(kind="Service")
        + " (a metal service's without a selector: its host agents' EndpointSlices are its endpoints); "
        "a JSON patch puts back ports someone replaced",
    ),
    Permission(
        HORIZONTAL_POD_AUTOSCALERS,
        ("get", "list", "watch", "create", "patch", "delete"),
        Scope.WATCHED,
        _OWNED_WHY.format(kind="HorizontalPodAutoscaler") + "; delete when autoscaling is turned off",
    ),
    Permission(
        PERSISTENT_VOLUME_CLAIMS,
        ("get", "list", "watch", "create"),
        Scope.WATCHED,
        "the per-namespace model cache claim: cached by name, created when missing, never changed or "
        "deleted (it outlives every service); get: the claim a pvc:// Model names",
    ),
    Permission(
        JOBS,
        ("list", "watch", "create", "delete"),
        Scope.WATCHED,
        "a Model's prefetch Jobs, cached by label: created (never changed: a new spec gets a new Job), "
        "deleted by uid when the spec moved on or prefetch was turned off",
    ),
    Permission(
        PODS, ("list", "watch"), Scope.WATCHED, "pods of our services: readiness and scheduling diagnosis"
    ),
    Permission(
        PODS,
        ("get",),
        Scope.WATCHED,
        "the model-downloader's last log lines, read while it runs: the download's progress in status",
        subresource="log",
    ),
    Permission(
        PODS,
        ("create",),
        Scope.WATCHED,
        "evictions of a service's pod past spec.maxPodLifetimeSeconds (one at a time; "
        "PodDisruptionBudgets hold)",
        subresource="eviction",
    ),
    Permission(
        ENDPOINT_SLICES,
        ("list", "watch"),
        Scope.WATCHED,
        "the metal agent's EndpointSlices: metal readiness; once at start (cluster-wide installs), "
        "the API server's own (default/kubernetes): Models' sources there are not fetched",
    ),
    Permission(
        EVENTS,
        ("list", "watch", "create", "patch"),
        Scope.WATCHED,
        "Events (events.k8s.io/v1): created, and patched as a series when they repeat; the scheduler's "
        "Preempted Events cached (field selector reason=Preempted): which pod preempted one of ours; "
        "a prefetch Job's FailedCreate Events listed while it has no pod: why its pod was refused",
    ),
    Permission(
        NODES,
        ("list", "watch"),
        Scope.CLUSTER,
        "GPU capacity: Models' acceleratorReady, services asking for more GPUs than any node has",
    ),
    Permission(
        NAMESPACES,
        ("list", "watch"),
        Scope.CLUSTER,
        "the labels that say what a namespace allows: its Pod Security level, local model sources, "
        "the highest priority",
    ),
    Permission(
        PRIORITY_CLASSES,
        ("list", "watch"),
        Scope.CLUSTER,
        "each service's effective priority; with --manage-priority-classes, the five llmkube-* classes",
    ),
    Permission(
        PRIORITY_CLASSES,
        ("create", "patch", "delete"),
        Scope.CLUSTER,
        "the five llmkube-* classes (--manage-priority-classes=true): server-side apply, and delete + "
        "create to repair an immutable value or preemption policy",
        manages_priority_classes=True,
    ),
    Permission(
        RUNTIME_CLASSES,
        ("list", "watch"),
        Scope.CLUSTER,
        "RuntimeClass names, so a service naming one that does not exist is told so",
    ),
    Permission(
        SERVICE_CIDRS,
        ("list",),
        Scope.CLUSTER,
        "the cluster's Service networks, read at start unless --service-cidr names them: Models' "
        "http(s) sources there are not fetched",
    ),
    Permission(
        SECRETS,
        ("create",),
        Scope.WATCHED,
        "a metal service's server key (<service>-server-key, owned by the service): created once, never "
        "read, changed or deleted (plan/inferenceservice/server_key.py)",
    ),
    Permission(
        LEASES,
        ("get", "create", "update"),
        Scope.LEASE,
        "leader election: read the Lease, create it once, renew/take over/release by update",
    ),
    Permission(
        SECRETS,
        ("get",),
        Scope.OWN_NAMESPACE,
        "the master key the metal services' server keys derive from: read by name",
        resource_names=(MASTER_SECRET,),
    ),
    Permission(
        SECRETS,
        ("create",),
        Scope.OWN_NAMESPACE,
        "that master key: created once, when the first metal service needs it and none exists",
    ),
    Permission(
        CONFIG_MAPS,
        ("get", "list", "watch", "patch"),
        Scope.OWN_NAMESPACE,
        "the metal Services the host agents' admission policy allows, cached by name: server-side "
        "apply (patch); get and a patch of its managedFields before undoing someone else's entry",
        resource_names=(METAL_SERVICES_CONFIGMAP,),
    ),
    Permission(
        CONFIG_MAPS,
        ("create",),
        Scope.OWN_NAMESPACE,
        "that ConfigMap, created by server-side apply with the first metal service (RBAC cannot "
        "limit a create to a name)",
    ),
)


def granted(
    permissions: Iterable[Permission] = PERMISSIONS,
) -> frozenset[tuple[str, str, str]]:
    """(verb, group, resource[/subresource]) for each verb of each permission."""
    return frozenset(
        (verb, permission.resource.group, permission.rbac_resource)
        for permission in permissions
        for verb in permission.verbs
    )


def rules(scopes: Iterable[Scope], *, manages_priority_classes: bool = False) -> tuple[Permission, ...]:
    """The permissions of these scopes; the priority-class writer's only when asked for (it is a
    role of its own)."""
    wanted = set(scopes)
    return tuple(
        permission
        for permission in PERMISSIONS
        if permission.scope in wanted and permission.manages_priority_classes == manages_priority_classes
    )
