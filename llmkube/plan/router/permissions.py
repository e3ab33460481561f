"""Every API call the router process makes, as RBAC rules: the one list its Role is made from.

The controller creates this Role (and a RoleBinding to the router's own ServiceAccount) for each
ModelRouter, so the controller must hold every permission listed here itself (Kubernetes refuses
to let anyone grant what they do not have): `llmkube/controllers/permissions.py` lists them for
that reason too. The router reads no Secret through the API: the kubelet mounts the ones the spec
names. The router runs with this Role alone in tests/e2e/test_router_tenancy.py (its own
ServiceAccount's token, on the full control plane) and on the node tier."""

from collections.abc import Iterable
from dataclasses import dataclass

from llmkube.api import constants as c


@dataclass(frozen=True)
class RouterPermission:
    group: str
    resource: str
    verbs: tuple[str, ...]
    why: str
    #: granted for the router's own ModelRouter only (resourceNames; list and watch then need a
    #: metadata.name field selector, which the router's informer sends)
    own_object_only: bool = False
    #: granted for its InferenceService backends only (resourceNames: their names, which are also
    #: their Deployments'); left out of a router with none
    backends_only: bool = False


ROUTER_PERMISSIONS: tuple[RouterPermission, ...] = (
    RouterPermission(
        c.GROUP,
        c.ROUTER_PLURAL,
        ("list", "watch"),
        "its own ModelRouter: the spec it routes by, reloaded on every change",
        own_object_only=True,
    ),
    RouterPermission(
        "discovery.k8s.io",
        "endpointslices",
        ("list", "watch"),
        "the ready pods of its InferenceService backends, by their Services' kubernetes.io/service-name",
    ),
    # Scale to zero (plan/router/wake.py): whether a backend sleeps, and the last request it saw.
    RouterPermission(
        c.GROUP,
        c.ISVC_PLURAL,
        ("list", "watch", "patch"),
        "its InferenceService backends: whether each is asleep (scale to zero), and the last request "
        "time the routers share (an annotation, at most once a minute)",
        backends_only=True,
    ),
    RouterPermission(
        "apps",
        "deployments/scale",
        ("get", "patch"),
        "wake a sleeping backend: its Deployment from 0 to 1 replica (read first, written only from 0)",
        backends_only=True,
    ),
)


def role_rules(router: str, backends: Iterable[str] = ()) -> list[dict[str, list[str]]]:
    """`backends`: the InferenceServices the spec names (an empty resourceNames would mean all)."""
    names = sorted(set(backends))
    rules = []
    for permission in ROUTER_PERMISSIONS:
        if permission.backends_only and not names:
            continue
        rule = {"apiGroups": [permission.group], "resources": [permission.resource]}
        if permission.own_object_only:
            rule["resourceNames"] = [router]
        if permission.backends_only:
            rule["resourceNames"] = names
        rule["verbs"] = list(permission.verbs)
        rules.append(rule)
    return rules


def granted(router: str) -> frozenset[tuple[str, str, str]]:
    """(verb, group, resource) the router may ask for."""
    return frozenset((verb, p.group, p.resource) for p in ROUTER_PERMISSIONS for verb in p.verbs)
