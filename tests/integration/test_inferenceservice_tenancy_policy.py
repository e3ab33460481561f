"""manifests/admission/inferenceservice_tenancy_policy.yaml on a real API server, from a tenant's own
token (a ServiceAccount bound to `llmkube-editor` in its namespace): the v0.9 fields are held to the
controller's default tenancy rules at `kubectl apply`, and what they allow goes through.

The policy is applied as shipped; only its binding is narrowed to this module's namespaces."""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmkube.api.crds import all_crds
from llmkube.testing.identities import service_account_kubeconfig
from llmkube.testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube.testing.rest import KubeRest, RestError, load_yaml_documents

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "manifests" / "admission" / "inferenceservice_tenancy_policy.yaml"
USER_ROLES = ROOT / "manifests" / "rbac" / "user_roles.yaml"
API = "inference.llmkube.dev/v1alpha1"
SCOPE_LABEL = "llmkube-test/tenancy-policy"
LOCAL_LABEL = "inference.llmkube.dev/local-model-sources"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {"modelRef": "m", **spec},
    }


def required(*expressions: dict[str, Any]) -> dict[str, Any]:
    terms = [{"matchExpressions": list(expressions)}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "host-path": (
        {"extraVolumes": [{"name": "etc", "hostPath": {"path": "/etc"}}]},
        "spec.extraVolumes: volume types",
    ),
    "nfs": (
        {"extraVolumes": [{"name": "n", "nfs": {"server": "nfs.example", "path": "/"}}]},
        "spec.extraVolumes: volume types",
    ),
    "iscsi": (
        {
            "extraVolumes": [
                {
                    "name": "i",
                    "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:x", "lun": 0},
                }
            ]
        },
        "spec.extraVolumes: volume types",
    ),
    "token": (
        {
            "extraVolumes": [
                {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
            ]
        },
        "spec.extraVolumes: a projected ServiceAccount token",
    ),
    "selector": ({"nodeSelector": {CONTROL_PLANE: ""}}, "spec.nodeSelector: selects control-plane"),
    "required": (
        {"affinity": required({"key": CONTROL_PLANE, "operator": "Exists"})},
        "spec.affinity.nodeAffinity",
    ),
    "preferred": (
        {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 1,
                            "preference": {
                                "matchExpressions": [
                                    {
                                        "key": "node-role.kubernetes.io/master",
                                        "operator": "In",
                                        "values": [""],
                                    }
                                ]
                            },
                        }
                    ]
                }
            }
        },
        "spec.affinity.nodeAffinity",
    ),
}
ALLOWED: dict[str, dict[str, Any]] = {
    "cache": {
        "extraVolumes": [{"name": "c", "emptyDir": {"sizeLimit": "1Gi"}}],
        "extraVolumeMounts": [{"name": "c", "mountPath": "/c"}],
    },
    "config": {"extraVolumes": [{"name": "c", "configMap": {"name": "settings"}}]},
    "projected-config": {
        "extraVolumes": [{"name": "p", "projected": {"sources": [{"configMap": {"name": "settings"}}]}}]
    },
    "avoid-control-plane": {"affinity": required({"key": CONTROL_PLANE, "operator": "DoesNotExist"})},
    "spread": {
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
        ]
    },
}


@pytest.fixture(scope="module")
def tenants(
    api_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, KubeRest]]:
    """Two namespaces under the policy (one labelled for local sources), a tenant in each."""
    admin = api_cluster.admin()
    apply_manifests(api_cluster, all_crds())
    apply_manifests(api_cluster, load_yaml_documents(USER_ROLES))
    labels = {
        "tenancy-plain": {SCOPE_LABEL: "on"},
        "tenancy-local": {SCOPE_LABEL: "on", LOCAL_LABEL: "allowed"},
    }
    docs = load_yaml_documents(POLICY)
    binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding")
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {SCOPE_LABEL: "on"}}}
    for doc in docs:
        admin.apply(doc)
    clients: dict[str, KubeRest] = {}
    for namespace, namespace_labels in labels.items():
        admin.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace, "labels": namespace_labels},
            }
        )
        admin.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "tenant-editor", "namespace": namespace},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "llmkube-editor",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
            }
        )
        path = service_account_kubeconfig(
            api_cluster.kubeconfig, namespace, "tenant", tmp_path_factory.mktemp(namespace) / "kubeconfig"
        )
        clients[namespace] = KubeRest.from_kubeconfig(path)
    # Policies take effect asynchronously: wait until a bad object is refused.
    deadline = time.monotonic() + 30
    while True:
        try:
            create(
                clients["tenancy-plain"], "tenancy-plain", service("probe", nodeSelector={CONTROL_PLANE: ""})
            )
        except RestError as refused:
            if refused.status in (403, 422):
                break
        if time.monotonic() > deadline:
            raise TimeoutError("the policy never took effect")
        time.sleep(0.2)
    yield clients
    for namespace in labels:
        admin.delete("v1", "Namespace", namespace)
    for doc in reversed(docs):
        admin.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])


def create(client: KubeRest, namespace: str, body: dict[str, Any]) -> None:
    client.request("POST", f"/apis/{API}/namespaces/{namespace}/inferenceservices?dryRun=All", body)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_tenant_is_refused_at_apply(tenants: dict[str, KubeRest], case: str) -> None:
    spec, message = REFUSED[case]
    with pytest.raises(RestError) as refused:
        create(tenants["tenancy-plain"], "tenancy-plain", service(case, **spec))
    assert refused.value.status == 403, refused.value
    assert message in str(refused.value)
    assert "ValidatingAdmissionPolicy 'llmkube-inferenceservice-tenancy'" in str(refused.value)


@pytest.mark.parametrize("case", sorted(ALLOWED))
def test_what_the_defaults_allow_goes_through(tenants: dict[str, KubeRest], case: str) -> None:
    create(tenants["tenancy-plain"], "tenancy-plain", service(case, **ALLOWED[case]))


def test_a_host_path_only_where_the_namespace_allows_local_sources(tenants: dict[str, KubeRest]) -> None:
    """The controller then holds the path to --model-local-roots (docs/security.md)."""
    spec = {"extraVolumes": [{"name": "models", "hostPath": {"path": "/data/models"}}]}
    create(tenants["tenancy-local"], "tenancy-local", service("local", **spec))
    with pytest.raises(RestError):
        create(tenants["tenancy-plain"], "tenancy-plain", service("local", **spec))
