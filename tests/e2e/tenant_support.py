"""A tenant as a platform hands it a namespace: a ServiceAccount bound to `llmkube-editor` in that
namespace only (it may create Models and InferenceServices; not pods, Deployments, Services, nor read
Secrets), and a kubeconfig with a token the API server issued for it."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmkube_testing.identities import service_account_kubeconfig
from llmkube_testing.pytest_plugin import ClusterHandle
from llmkube_testing.rest import KubeRest, RestError


@dataclass(frozen=True)
class Tenant:
    namespace: str
    client: KubeRest
    user: str


def tenant_in(cluster: ClusterHandle, namespace: str, workdir: Path) -> Tenant:
    admin = cluster.admin()
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant-llmkube-editor", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "llmkube-editor",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
        }
    )
    kubeconfig = service_account_kubeconfig(
        cluster.kubeconfig, namespace, "tenant", workdir / f"{namespace}.kubeconfig"
    )
    tenant = Tenant(
        namespace, KubeRest.from_kubeconfig(kubeconfig), f"system:serviceaccount:{namespace}:tenant"
    )
    assert_denied(tenant, "POST", f"/api/v1/namespaces/{namespace}/pods", _POD)
    assert_denied(tenant, "GET", f"/api/v1/namespaces/{namespace}/secrets")
    return tenant


_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "probe"},
    "spec": {"containers": [{"name": "c", "image": "x"}]},
}


def assert_denied(tenant: Tenant, method: str, path: str, body: Any = None) -> None:
    """RBAC really refuses the tenant this (so whatever it gets otherwise, it gets through us)."""
    try:
        tenant.client.request(method, path, body)
    except RestError as refused:
        assert refused.status == 403, refused
        return
    raise AssertionError(f"{tenant.user} may {method} {path}: the test's premise is wrong")
