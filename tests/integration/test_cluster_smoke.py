"""The api tier is a real, secured API server: RBAC on, server-side apply, discovery."""

import pytest
from llmkube_testing.pytest_plugin import ClusterHandle
from llmkube_testing.rest import RestError, wait_until


def test_server_reports_pinned_version(api_cluster: ClusterHandle) -> None:
    status, body = api_cluster.admin().get_text("/version")
    assert status == 200
    if api_cluster.local is not None:
        assert '"gitVersion": "v1.37.2"' in body


def test_server_side_apply_records_field_manager(api_cluster: ClusterHandle, namespace: str) -> None:
    admin = api_cluster.admin()
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "smoke", "namespace": namespace},
        "data": {"a": "1"},
    }
    applied = admin.request(
        "PATCH",
        admin.path_for("v1", "ConfigMap", namespace, "smoke"),
        cm,
        content_type="application/apply-patch+yaml",
        query={"fieldManager": "llmkube-controller", "force": "true"},
    )
    managers = {(m["manager"], m["operation"]) for m in applied["metadata"]["managedFields"]}
    assert ("llmkube-controller", "Apply") in managers
    entry = next(m for m in applied["metadata"]["managedFields"] if m["manager"] == "llmkube-controller")
    assert "f:a" in entry["fieldsV1"]["f:data"]


def test_restricted_identity_is_refused_what_it_was_not_granted(
    api_cluster: ClusterHandle, namespace: str
) -> None:
    restricted = api_cluster.restricted()
    with pytest.raises(RestError) as refused:
        restricted.list("v1", "Pod", namespace)
    assert refused.value.status == 403
    assert "llmkube-restricted" in str(refused.value)

    # ...and allowed once RBAC grants it: the authorizer really is RBAC.
    admin = api_cluster.admin()
    admin.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "pod-reader", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        }
    )
    admin.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "pod-reader", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [
                {"kind": "User", "name": "llmkube-restricted", "apiGroup": "rbac.authorization.k8s.io"}
            ],
        }
    )
    # RBAC changes reach the authorizer through its informer: allow a moment (403s are retried).
    wait_until(lambda: restricted.list("v1", "Pod", namespace) == [], timeout=10, what="RBAC grant")
    assert restricted.list("v1", "Pod", namespace) == []
