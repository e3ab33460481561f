"""The checks that hold a ModelRouter to what the admin allows tenants, as an InferenceService is
held (plan/tenancy.py, docs/security.md). Creating a ModelRouter creates a Deployment, a Service
and an identity under the controller's rights; each field that reaches further than the tenant's
own namespace is judged here, and a spec that asks for more is `Failed` with reason
`PolicyViolation`, naming the field, before anything is applied:

- `spec.endpoint.type`: the router's Service type, among `--allowed-service-types`;
- `spec.proxy.image`: the image runs with the Secrets the spec names mounted and the router's
  ServiceAccount token, so only the router image the controller would use itself (`--router-image`)
  or one an admin lists in `--router-allowed-images`;
- `spec.backends[].external.url` of a backend with credentials: where the key goes
  (plan/router/credential_hosts.py);
- the router's pod, as built, meets the cluster's `--max-pod-security` and the namespace's enforced
  level (it is built to meet restricted whatever the spec says; this is the check that it does).

Which Secrets a spec may name depends on who writes it, which only the API server knows:
manifests/admission/secret_references_policy.yaml refuses those at `kubectl apply`."""

from collections.abc import Mapping
from typing import Any

from llmkube.api.base import KubeObject
from llmkube.api.modelrouter import ModelRouter
from llmkube.plan.apiserver.pod_security import ENFORCE_LABEL, Level, violations
from llmkube.plan.inferenceservice.policy import SERVICE_TYPES
from llmkube.plan.router.credential_hosts import credential_host_issues
from llmkube.plan.router.objects import RouterPlanConfig, deployment
from llmkube.plan.tenancy import (
    ALLOWED_SERVICE_TYPES_FLAG,
    MAX_POD_SECURITY_FLAG,
    NamespacePolicy,
    PolicyIssue,
    TenancyPolicy,
)

ALLOWED_IMAGES_FLAG = "--router-allowed-images"
ROUTER_IMAGE_FLAG = "--router-image"
_POD = "spec.template.spec"
_CONTAINER = f"{_POD}.containers[0]"


def service_type_issues(router: ModelRouter, policy: TenancyPolicy) -> list[PolicyIssue]:
    """The admin's `--allowed-service-types` apply to a router's Service as to any service's."""
    endpoint = router.spec.endpoint
    wanted = (endpoint.type if endpoint is not None else None) or "ClusterIP"
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


def repository(image: str) -> str:
    """`registry:5000/team/router` of `registry:5000/team/router:1.2@sha256:...`: the reference
    without its digest and tag (a colon after the last slash starts the tag)."""
    name = image.partition("@")[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def image_allowed(image: str, config: RouterPlanConfig) -> bool:
    """The controller's own router image, or an entry of `--router-allowed-images`: one with a tag
    or digest allows exactly that reference, one without allows every tag and digest of that
    repository. Compared as written (`docker.io/library/x` is not `x`)."""
    if image == config.image:
        return True
    for entry in config.allowed_images:
        if image == entry or (repository(entry) == entry and repository(image) == entry):
            return True
    return False


def image_issues(router: ModelRouter, config: RouterPlanConfig) -> list[PolicyIssue]:
    proxy = router.spec.proxy
    image = proxy.image if proxy is not None and proxy.image else ""
    if not image or image_allowed(image, config):
        return []
    listed = ", ".join(config.allowed_images) or "none"
    return [
        PolicyIssue(
            "spec.proxy.image",
            f'image "{image}" is not allowed: the router runs {config.image} ({ROUTER_IMAGE_FLAG}) or '
            f"an image an admin lists in {ALLOWED_IMAGES_FLAG} ({listed}); it would run with the "
            "router's Secrets and ServiceAccount token",
        )
    ]


def _origin(path: str) -> str:
    """The ModelRouter field a path of the router's Deployment came from."""
    if path.startswith(f"{_CONTAINER}.image"):
        return "spec.proxy.image"
    if path.startswith(f"{_CONTAINER}.resources"):
        return "spec.proxy.resources"
    return f"Deployment {path} (set by the controller)"


def pod_security_issues(
    built: KubeObject, namespace: str, policy: TenancyPolicy, ns: NamespacePolicy
) -> list[PolicyIssue]:
    """What the router's pod template does beyond the cluster's maximum and the namespace's
    enforced level, as for an InferenceService's pods (plan/inferenceservice/policy.py)."""
    template = (built.get("spec") or {}).get("template") or {}
    checks: list[tuple[Level, str]] = [(policy.max_pod_security, f"the controller's {MAX_POD_SECURITY_FLAG}")]
    if ns.enforce is not None:
        checks.append((ns.enforce, f"namespace {namespace!r}'s {ENFORCE_LABEL} label"))
    issues: dict[tuple[str, str], PolicyIssue] = {}
    for level, who in checks:
        for violation in violations(template, level):
            for path in violation.paths:
                field_name = _origin(path)
                issues.setdefault(
                    (field_name, violation.check),
                    PolicyIssue(
                        field_name,
                        f'Pod Security "{level}" ({who}) forbids {violation.reason}: {violation.detail}',
                    ),
                )
    return list(issues.values())


def policy_issues(
    router: ModelRouter,
    spec: Mapping[str, Any],
    config: RouterPlanConfig,
    ns: NamespacePolicy,
    *,
    built: KubeObject | None = None,
) -> list[PolicyIssue]:
    """Everything in the spec the admin does not allow (empty: it may be deployed). `built` is the
    Deployment the controller would apply (made here when not given)."""
    namespace = router.metadata.namespace or ""
    made = built if built is not None else deployment(router, config)
    return [
        *service_type_issues(router, config.tenancy),
        *image_issues(router, config),
        *(PolicyIssue(i.field, i.message) for i in credential_host_issues(spec, config.external_hosts)),
        *pod_security_issues(made, namespace, config.tenancy, ns),
    ]
