"""Requests read the way the API server's authorizer reads them (verb, group, resource, subresource)."""

import pytest
from llmkube_testing.request_info import ApiRequest, api_request, request_namespace


@pytest.mark.parametrize(
    ("method", "path", "params", "expected"),
    [
        ("GET", "/api/v1/pods", None, ("list", "", "pods", "")),
        ("GET", "/api/v1/namespaces/ns/pods", {"watch": True}, ("watch", "", "pods", "")),
        ("GET", "/api/v1/namespaces/ns/pods", {"watch": "1"}, ("watch", "", "pods", "")),
        ("GET", "/api/v1/namespaces/ns/pods", {"watch": False}, ("list", "", "pods", "")),
        ("GET", "/api/v1/namespaces/ns/pods/p", None, ("get", "", "pods", "")),
        ("GET", "/api/v1/namespaces/ns/pods/p/log", None, ("get", "", "pods", "log")),
        ("POST", "/apis/apps/v1/namespaces/ns/deployments", None, ("create", "apps", "deployments", "")),
        ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d", None, ("patch", "apps", "deployments", "")),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
            None,
            ("update", "coordination.k8s.io", "leases", ""),
        ),
        (
            "PATCH",
            "/apis/inference.llmkube.dev/v1alpha1/namespaces/ns/inferenceservices/a/status",
            None,
            ("patch", "inference.llmkube.dev", "inferenceservices", "status"),
        ),
        (
            "DELETE",
            "/apis/autoscaling/v2/namespaces/ns/horizontalpodautoscalers/h",
            None,
            ("delete", "autoscaling", "horizontalpodautoscalers", ""),
        ),
        ("DELETE", "/api/v1/namespaces/ns/pods", None, ("deletecollection", "", "pods", "")),
        (
            "GET",
            "/apis/scheduling.k8s.io/v1/priorityclasses/c",
            None,
            ("get", "scheduling.k8s.io", "priorityclasses", ""),
        ),
        ("GET", "/api/v1/nodes", {"watch": "true"}, ("watch", "", "nodes", "")),
        # the Namespace resource itself
        ("GET", "/api/v1/namespaces", None, ("list", "", "namespaces", "")),
        ("GET", "/api/v1/namespaces/ns", None, ("get", "", "namespaces", "")),
        ("PUT", "/api/v1/namespaces/ns/finalize", None, ("update", "", "namespaces", "finalize")),
        ("PATCH", "/api/v1/namespaces/ns/status", None, ("patch", "", "namespaces", "status")),
        # a query string in the path is not part of it
        ("GET", "/api/v1/namespaces/ns/pods?watch=1", None, ("list", "", "pods", "")),
        # non-resource paths
        ("GET", "/readyz", None, ("get", "", "", "")),
        ("GET", "/version", None, ("get", "", "", "")),
    ],
)
def test_api_request(
    method: str, path: str, params: dict[str, object] | None, expected: tuple[str, str, str, str]
) -> None:
    assert api_request(method, path, params) == ApiRequest(*expected)


def test_rbac_resource_names_the_subresource() -> None:
    assert ApiRequest("patch", "x.dev", "things", "status").rbac_resource == "things/status"
    assert ApiRequest("get", "", "pods", "").rbac_resource == "pods"


@pytest.mark.parametrize(
    ("path", "namespace"),
    [
        ("/api/v1/namespaces/ml/pods", "ml"),
        ("/api/v1/namespaces/ml/pods/p-1/log?container=x", "ml"),
        ("/apis/apps/v1/namespaces/ml/deployments/web", "ml"),
        ("/apis/inference.llmkube.dev/v1alpha1/namespaces/ml/models/m/status", "ml"),
        ("/api/v1/namespaces/ml", ""),  # the Namespace itself
        ("/api/v1/namespaces/ml/finalize", ""),
        ("/api/v1/nodes/n-1", ""),
        ("/apis/scheduling.k8s.io/v1/priorityclasses", ""),
        ("/healthz", ""),
    ],
)
def test_the_namespace_a_request_names(path: str, namespace: str) -> None:
    assert request_namespace(path) == namespace
