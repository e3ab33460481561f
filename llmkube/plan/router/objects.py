"""The objects the controller keeps for a ModelRouter, all named `<name>-router-proxy` (the
reference's names: its users' URLs keep working) and owned by it: the router's ServiceAccount, its
Role (plan/router/permissions.py) and RoleBinding, its Service and its Deployment.

The Deployment runs the controller's own image with `llmkube router`, hardened like the inference
pods and within Pod Security "restricted" whatever the spec says: non-root, RuntimeDefault seccomp,
no privilege escalation, every capability dropped, a read-only root. It gets a ServiceAccount token
(the router watches the API), and the Secrets the spec names as read-only files, nothing else:
provider keys under /var/run/llmkube/credentials/<secret>/, client keys under
/var/run/llmkube/api-keys/<secret>/, each InferenceService backend's server key (a metal service's
host servers ask for it: plan/inferenceservice/server_key.py) under
/var/run/llmkube/server-keys/<service>/ (optional volumes: a Secret created later is picked up without
a restart, and a missing one is a backend that cannot authenticate, not a pod that cannot start).

Intents are server-side apply bodies with only the fields we own (plan/inferenceservice/objects.py).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llmkube import __version__
from llmkube.api import constants as c
from llmkube.api.base import KubeObject
from llmkube.api.modelrouter import ModelRouter
from llmkube.apimachinery.proxy import DIRECT, ProxyConfig
from llmkube.apimachinery.quantity import QuantityError, canonical_quantity
from llmkube.plan.allowed_hosts import AllowedHost
from llmkube.plan.inferenceservice.hardening import NON_ROOT_USER
from llmkube.plan.inferenceservice.objects import compact
from llmkube.plan.inferenceservice.server_key import secret_name as server_key_secret
from llmkube.plan.router.permissions import role_rules
from llmkube.plan.tenancy import TenancyPolicy

ROUTER_SUFFIX = "-router-proxy"
CONTAINER = "router"
PORT_NAME = "http"
CONTAINER_PORT = 8080
SECRETS_DIR = "/var/run/llmkube"
#: sized with the body budget and the connection caps (docs/router.md, "Memory")
DEFAULT_RESOURCES: KubeObject = {
    "requests": {"cpu": "100m", "memory": "128Mi"},
    "limits": {"memory": "512Mi"},
}
#: 0440: readable by the router's group (fsGroup) only
SECRET_MODE = 0o440
#: the router drains for up to 30 s (llmkube/router/process.py)
GRACE_SECONDS = 40
#: A new router pod is ready before an old one goes: the endpoint never has fewer replicas than
#: asked. Spelled out whole: the Deployment's strategy is a block we own entirely
#: (controllers/apply_policies.py).
ROLLOUT: KubeObject = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
#: the controller's own image, as manifests/manager/deployment.yaml names it
DEFAULT_IMAGE = f"ghcr.io/llmkube/llmkube:{__version__}"


@dataclass(frozen=True)
class RouterPlanConfig:
    """What the controller's flags say about routers."""

    #: `--router-image`: the image of the router pods when the spec names none (the controller's)
    image: str = DEFAULT_IMAGE
    tenancy: TenancyPolicy = field(default_factory=TenancyPolicy)
    #: `--router-allowed-images`: images a spec's `proxy.image` may name besides `image`
    allowed_images: tuple[str, ...] = ()
    #: `--router-external-hosts`: hosts a backend with credentials may lead to besides its
    #: provider's own (plan/router/credential_hosts.py); the router pods get the same list
    external_hosts: tuple[AllowedHost, ...] = ()
    #: the controller's HTTPS_PROXY / HTTP_PROXY / NO_PROXY (the cluster's addresses bypassing it):
    #: the router pods reach external providers through it. An admin's setting, not the spec's: a
    #: proxy a tenant names could lead where the egress rules would not.
    egress_proxy: ProxyConfig = DIRECT


def router_name(name: str) -> str:
    """`<name>-router-proxy`, a DNS label (dots become dashes, as for an InferenceService's Service)."""
    return name.replace(".", "-") + ROUTER_SUFFIX


def selector_labels(name: str) -> dict[str, str]:
    return {c.LABEL_APP: router_name(name), c.LABEL_MODEL_ROUTER: name}


def object_labels(name: str) -> dict[str, str]:
    return {
        **selector_labels(name),
        c.LABEL_NAME: "llmkube",
        c.LABEL_COMPONENT: "router",
        c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE,
    }


def owner_reference(router: ModelRouter) -> KubeObject:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.ROUTER_KIND,
        "name": router.metadata.name or "",
        "uid": router.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": False,
    }


def controlled_by(obj: Mapping[str, Any], router: ModelRouter) -> bool:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if (
            ref.get("controller") is True
            and ref.get("kind") == c.ROUTER_KIND
            and str(ref.get("apiVersion", "")).split("/")[0] == c.GROUP
            and ref.get("uid", "") == (router.metadata.uid or "")
        ):
            return True
    return False


def _metadata(router: ModelRouter) -> KubeObject:
    name = router.metadata.name or ""
    return {
        "name": router_name(name),
        "namespace": router.metadata.namespace or "",
        "labels": object_labels(name),
        "ownerReferences": [owner_reference(router)],
    }


def service_account(router: ModelRouter) -> KubeObject:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(router)}


def backend_services(router: ModelRouter) -> list[str]:
    """The InferenceServices its backends name (the router may wake them: plan/router/wake.py)."""
    return sorted(
        {ref.name for b in router.spec.backends if (ref := b.inference_service_ref) is not None and ref.name}
    )


def role(router: ModelRouter) -> KubeObject:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(router),
        "rules": role_rules(router.metadata.name or "", backend_services(router)),
    }


def role_binding(router: ModelRouter) -> KubeObject:
    name = router_name(router.metadata.name or "")
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(router),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": router.metadata.namespace or ""}],
    }


def endpoint_port(router: ModelRouter) -> int:
    endpoint = router.spec.endpoint
    return endpoint.port if endpoint is not None and endpoint.port else 8080


def endpoint_url(router: ModelRouter) -> str:
    endpoint = router.spec.endpoint
    path = endpoint.path if endpoint is not None and endpoint.path else "/v1/chat/completions"
    host = f"{router_name(router.metadata.name or '')}.{router.metadata.namespace or ''}.svc.cluster.local"
    return f"http://{host}:{endpoint_port(router)}{path}"


def service(router: ModelRouter) -> KubeObject:
    endpoint = router.spec.endpoint
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(router),
        "spec": {
            "type": (endpoint.type if endpoint is not None and endpoint.type else "ClusterIP"),
            "selector": selector_labels(router.metadata.name or ""),
            "ports": [
                {"name": PORT_NAME, "port": endpoint_port(router), "targetPort": PORT_NAME, "protocol": "TCP"}
            ],
        },
    }


def credential_secrets(router: ModelRouter) -> list[str]:
    """The Secrets of the external backends' keys, each once, in the order the spec names them."""
    names = []
    for backend in router.spec.backends:
        ref = backend.external.credentials_secret_ref if backend.external is not None else None
        if ref is not None and ref.name and ref.name not in names:
            names.append(ref.name)
    return names


def local_services(router: ModelRouter) -> list[str]:
    """The InferenceServices the backends name, each once, in the order the spec names them."""
    names = []
    for backend in router.spec.backends:
        ref = backend.inference_service_ref
        if ref is not None and ref.name and ref.name not in names:
            names.append(ref.name)
    return names


def api_keys_secret(router: ModelRouter) -> str | None:
    policy = router.spec.policy
    keys = policy.api_keys if policy is not None else None
    return keys.secret_ref.name or None if keys is not None else None


def _resources(router: ModelRouter) -> KubeObject:
    proxy = router.spec.proxy
    given = proxy.resources if proxy is not None and proxy.resources else None
    if not given or not (given.get("requests") or given.get("limits")):
        return {key: dict(value) for key, value in DEFAULT_RESOURCES.items()}
    resources: KubeObject = {}
    for kind in ("requests", "limits"):
        values = given.get(kind) or {}
        converted = {}
        for name, value in values.items():
            try:
                converted[name] = canonical_quantity(str(value))
            except QuantityError:
                converted[name] = str(value)  # the schema's pattern refused it already
        if converted:
            resources[kind] = converted
    if given.get("claims"):
        resources["claims"] = given["claims"]
    return resources


def _audit_dir(router: ModelRouter) -> str | None:
    policy = router.spec.policy
    audit = policy.audit_log if policy is not None else None
    if audit is None or audit.sink != "file":
        return None
    from llmkube.plan.router.config import DEFAULT_AUDIT_FILE

    return posixpath.dirname(audit.file_path or DEFAULT_AUDIT_FILE)


def _external_hosts_args(config: RouterPlanConfig) -> list[str]:
    """The router refuses a credentialed URL the admin did not allow too (a spec edited under a
    running router): it gets the admin's list. None when it is empty, so that the Deployments of
    clusters that never set it do not change."""
    entries = ",".join(entry.entry for entry in config.external_hosts)
    return [f"--external-hosts={entries}"] if entries else []


def _secret_volume(volume: str, secret: str) -> KubeObject:
    return {"name": volume, "secret": {"secretName": secret, "optional": True, "defaultMode": SECRET_MODE}}


def deployment(router: ModelRouter, config: RouterPlanConfig) -> KubeObject:
    name = router.metadata.name or ""
    proxy = router.spec.proxy
    volumes: list[KubeObject] = []
    mounts: list[KubeObject] = []
    for index, secret in enumerate(credential_secrets(router)):
        volume = f"credentials-{index}"
        volumes.append(_secret_volume(volume, secret))
        mounts.append({"name": volume, "mountPath": f"{SECRETS_DIR}/credentials/{secret}", "readOnly": True})
    keys = api_keys_secret(router)
    if keys:
        volumes.append(_secret_volume("api-keys", keys))
        mounts.append({"name": "api-keys", "mountPath": f"{SECRETS_DIR}/api-keys/{keys}", "readOnly": True})
    for index, service in enumerate(local_services(router)):
        # A metal service's host servers ask for its key (server_key.py); others have none, and
        # the optional volume stays empty (it fills if the service moves to a host).
        volume = f"server-key-{index}"
        volumes.append(_secret_volume(volume, server_key_secret(service)))
        mounts.append({"name": volume, "mountPath": f"{SECRETS_DIR}/server-keys/{service}", "readOnly": True})
    audit_dir = _audit_dir(router)
    if audit_dir:
        volumes.append({"name": "audit", "emptyDir": {}})
        mounts.append({"name": "audit", "mountPath": audit_dir})
    probe = {"path": "/readyz", "port": PORT_NAME, "scheme": "HTTP"}
    container: KubeObject = {
        "name": CONTAINER,
        "image": (proxy.image if proxy is not None and proxy.image else config.image),
        "imagePullPolicy": "IfNotPresent",
        "command": ["llmkube", "router"],
        "args": [f"--model-router={name}", "--log-format=json", *_external_hosts_args(config)],
        "env": [
            # fieldRef is atomic for server-side apply: its apiVersion is spelled out as the server
            # defaults it, or every apply would see a difference.
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            *({"name": k, "value": v} for k, v in config.egress_proxy.environment().items()),
        ],
        "ports": [{"name": PORT_NAME, "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": probe, "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 2},
        "livenessProbe": {
            "httpGet": {**probe, "path": "/healthz"},
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "resources": _resources(router),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }
    pull_secrets = [{"name": s.name} for s in (proxy.image_pull_secrets or []) if s.name] if proxy else []
    pod: KubeObject = {
        "serviceAccountName": router_name(name),
        "automountServiceAccountToken": True,
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_USER,
            "runAsGroup": NON_ROOT_USER,
            "fsGroup": NON_ROOT_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "imagePullSecrets": pull_secrets,
        "containers": [compact(container)],
        "volumes": volumes,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(router),
        "spec": {
            "replicas": (proxy.replicas if proxy is not None and proxy.replicas else 1),
            "selector": {"matchLabels": selector_labels(name)},
            "strategy": ROLLOUT,
            "template": {"metadata": {"labels": object_labels(name)}, "spec": compact(pod)},
        },
    }


def router_objects(router: ModelRouter, config: RouterPlanConfig) -> list[KubeObject]:
    """In the order they are applied: the pod's identity and rights before the pod."""
    return [
        service_account(router),
        role(router),
        role_binding(router),
        service(router),
        deployment(router, config),
    ]
