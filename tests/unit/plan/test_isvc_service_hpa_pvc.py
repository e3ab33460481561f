"""Service (targetPort the named container port), endpoint URL, HPA (only our own deleted), cache
PVC (only when mounted)."""

from typing import Any

import pytest
from isvc_factories import UID, make_isvc, make_model
from isvc_planning import plan

from llmkube.api.inferenceservice import AutoscalingSpec
from llmkube.plan.inferenceservice.cache_pvc import cache_pvc_intent
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.hpa import hpa_errors
from llmkube.plan.inferenceservice.policy import SERVICE_TYPES
from llmkube.plan.inferenceservice.service import endpoint_url
from llmkube.plan.tenancy import TenancyPolicy


def test_service_intent() -> None:
    service = plan().service
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "demo",
            "namespace": "ai",
            "labels": {
                "app": "demo",
                "inference.llmkube.dev/service": "demo",
                "app.kubernetes.io/managed-by": "llmkube",
                "inference.llmkube.dev/mode": "chat",
            },
            "ownerReferences": [
                {
                    "apiVersion": "inference.llmkube.dev/v1alpha1",
                    "kind": "InferenceService",
                    "name": "demo",
                    "uid": UID,
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": "demo", "inference.llmkube.dev/service": "demo"},
            "ports": [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}],
        },
    }


@pytest.mark.parametrize(
    ("endpoint", "service_type", "port"),
    [
        (None, "ClusterIP", 8080),
        ({}, "ClusterIP", 8080),
        ({"type": "NodePort", "port": 9000}, "NodePort", 9000),
        ({"type": "LoadBalancer"}, "LoadBalancer", 8080),
        ({"type": None, "port": None}, "ClusterIP", 8080),
    ],
)
def test_service_type_and_port(endpoint: dict[str, Any] | None, service_type: str, port: int) -> None:
    spec = {"endpoint": endpoint} if endpoint is not None else {}
    # Types beyond ClusterIP only where the admin allows them (plan/tenancy.py).
    every_type = OperatorConfig(tenancy=TenancyPolicy(allowed_service_types=frozenset(SERVICE_TYPES)))
    service = plan(spec, config=every_type).service
    assert service is not None
    assert service["spec"]["type"] == service_type
    assert service["spec"]["ports"] == [
        {"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}
    ]


@pytest.mark.parametrize("runtime", ["vllm", "tgi"])
def test_target_port_is_the_named_container_port(runtime: str) -> None:
    # vLLM listens on 8000 and TGI on 80 while the Service port is 8080: the name bridges them.
    result = plan({"runtime": runtime})
    assert result.service is not None and result.deployment is not None
    assert result.service["spec"]["ports"][0]["targetPort"] == "http"
    ports = result.deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert ports[0]["name"] == "http" and ports[0]["containerPort"] != 8080


def test_service_name_replaces_dots() -> None:
    result = plan(isvc=make_isvc(name="llama.3b"))
    assert result.service is not None and result.deployment is not None
    assert result.service["metadata"]["name"] == "llama-3b"
    assert result.deployment["metadata"]["name"] == "llama.3b"
    assert result.service["spec"]["selector"]["app"] == "llama.3b"


@pytest.mark.parametrize(
    ("name", "endpoint", "url"),
    [
        ("demo", None, "http://demo.ai.svc.cluster.local:8080/v1/chat/completions"),
        ("llama.3b", None, "http://llama-3b.ai.svc.cluster.local:8080/v1/chat/completions"),
        (
            "demo",
            {"port": 9000, "path": "/v1/completions"},
            "http://demo.ai.svc.cluster.local:9000/v1/completions",
        ),
        ("demo", {"path": ""}, "http://demo.ai.svc.cluster.local:8080/v1/chat/completions"),
        ("demo", {"type": "LoadBalancer"}, "http://demo.ai.svc.cluster.local:8080/v1/chat/completions"),
    ],
)
def test_endpoint_url(name: str, endpoint: dict[str, Any] | None, url: str) -> None:
    spec = {"endpoint": endpoint} if endpoint is not None else {}
    assert endpoint_url(make_isvc(spec, name=name)) == url


def test_no_hpa_without_autoscaling() -> None:
    assert plan().hpa is None


@pytest.mark.parametrize(
    ("runtime", "metric"),
    [
        ("llamacpp", "llamacpp:requests_processing"),
        ("vllm", "vllm:num_requests_running"),
        ("tgi", "tgi_queue_size"),
        ("personaplex", "llamacpp:requests_processing"),
        ("generic", "llamacpp:requests_processing"),
    ],
)
def test_hpa_default_metric_per_runtime(runtime: str, metric: str) -> None:
    hpa = plan({"runtime": runtime, "image": "i", "autoscaling": {"maxReplicas": 4}}).hpa
    assert hpa is not None
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Pods",
            "pods": {"metric": {"name": metric}, "target": {"type": "AverageValue", "averageValue": "2"}},
        }
    ]


def test_hpa_intent() -> None:
    hpa = plan({"autoscaling": {"minReplicas": 2, "maxReplicas": 6}}).hpa
    assert hpa is not None
    assert hpa["apiVersion"] == "autoscaling/v2" and hpa["kind"] == "HorizontalPodAutoscaler"
    assert hpa["metadata"]["name"] == "demo"
    assert hpa["metadata"]["labels"] == {
        "app": "demo",
        "inference.llmkube.dev/service": "demo",
        "app.kubernetes.io/managed-by": "llmkube",
    }
    assert hpa["metadata"]["ownerReferences"][0]["uid"] == UID
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "demo"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6)
    assert "behavior" not in hpa["spec"]


@pytest.mark.parametrize(
    ("replicas", "autoscaling", "initial"),
    [
        (None, {"maxReplicas": 4}, 1),
        (3, {"maxReplicas": 4}, 3),
        (3, {"minReplicas": 1, "maxReplicas": 5}, 3),
        (1, {"minReplicas": 2, "maxReplicas": 5}, 2),  # raised to the HPA's minimum
        (7, {"minReplicas": 1, "maxReplicas": 4}, 4),  # lowered to its maximum
    ],
)
def test_an_autoscaled_deployment_is_created_at_spec_replicas_within_the_hpa_bounds(
    replicas: int | None, autoscaling: dict[str, Any], initial: int
) -> None:
    spec: dict[str, Any] = {"autoscaling": autoscaling}
    if replicas is not None:
        spec["replicas"] = replicas
    result = plan(spec)
    assert result.deployment is not None and "replicas" not in result.deployment["spec"]
    # Only when the Deployment is created; afterwards the HPA owns the count.
    assert result.deployment_initial == {"spec": {"replicas": initial}}
    assert result.status.desired_replicas == initial


@pytest.mark.parametrize(
    "spec",
    [{}, {"replicas": 3}, {"replicas": 0, "autoscaling": {"maxReplicas": 4}}],
)
def test_without_an_hpa_owning_the_count_nothing_is_create_only(spec: dict[str, Any]) -> None:
    result = plan(spec)
    assert result.deployment is not None
    assert result.deployment["spec"]["replicas"] == spec.get("replicas", 1)
    assert result.deployment_initial is None


def test_hpa_min_replicas_defaults_to_1() -> None:
    hpa = plan({"autoscaling": {"maxReplicas": 3, "minReplicas": None}}).hpa
    assert hpa is not None and hpa["spec"]["minReplicas"] == 1


def test_hpa_explicit_metrics_in_order() -> None:
    metrics = [
        {"type": "Pods", "name": "llamacpp:requests_pending", "targetAverageValue": "0.5"},
        {"type": "Resource", "name": "cpu", "targetAverageUtilization": 80},
        {"type": "Resource", "name": "memory", "targetAverageValue": "2048Mi"},
    ]
    hpa = plan({"autoscaling": {"maxReplicas": 3, "metrics": metrics}}).hpa
    assert hpa is not None
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "llamacpp:requests_pending"},
                "target": {"type": "AverageValue", "averageValue": "500m"},
            },
        },
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        },
        {
            "type": "Resource",
            "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "2Gi"}},
        },
    ]


@pytest.mark.parametrize(
    ("autoscaling", "errors"),
    [
        ({"maxReplicas": 3}, []),
        ({"maxReplicas": 2, "minReplicas": 3}, ["spec.autoscaling.minReplicas"]),
        (
            {"maxReplicas": 2, "metrics": [{"type": "Pods", "name": "m"}]},
            ["spec.autoscaling.metrics[0].targetAverageValue"],
        ),
        (
            {"maxReplicas": 2, "metrics": [{"type": "Pods", "name": "m", "targetAverageValue": "lots"}]},
            ["spec.autoscaling.metrics[0].targetAverageValue"],
        ),
        (
            {"maxReplicas": 2, "metrics": [{"type": "Pods", "name": "m", "targetAverageUtilization": 50}]},
            ["spec.autoscaling.metrics[0].targetAverageValue"],
        ),
        (
            {"maxReplicas": 2, "metrics": [{"type": "Resource", "name": "cpu"}]},
            ["spec.autoscaling.metrics[0]"],
        ),
        (
            {"maxReplicas": 2, "metrics": [{"type": "Resource", "name": "cpu", "targetAverageValue": "x"}]},
            ["spec.autoscaling.metrics[0].targetAverageValue"],
        ),
    ],
)
def test_hpa_errors(autoscaling: dict[str, Any], errors: list[str]) -> None:
    assert [path for path, _ in hpa_errors(AutoscalingSpec.model_validate(autoscaling))] == errors
    assert hpa_errors(None) == []


def test_cache_pvc_planned_only_when_mounted() -> None:
    assert plan().cache_pvc is not None
    assert plan(model=make_model("pvc://weights/x.gguf")).cache_pvc is None
    assert plan(model=make_model(cache_key="")).cache_pvc is None
    assert plan({"skipModelInit": True}).cache_pvc is None
    assert plan({"runtime": "tgi"}).cache_pvc is None
    assert plan(model=make_model(hardware={"accelerator": "metal"})).cache_pvc is None


def test_ephemeral_storage_plans_no_claim_and_a_limited_emptydir() -> None:
    ephemeral = OperatorConfig(model_storage="ephemeral", ephemeral_cache_size_limit="1Gi")
    result = plan(config=ephemeral)
    assert result.cache_pvc is None
    assert result.deployment is not None
    volumes = result.deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "model-storage", "emptyDir": {"sizeLimit": "1Gi"}} in volumes
    assert not [v for v in volumes if "persistentVolumeClaim" in v]


@pytest.mark.parametrize(
    ("config", "spec"),
    [
        (
            OperatorConfig(),
            {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}},
        ),
        (
            OperatorConfig(
                model_cache_access_mode="ReadWriteMany",
                model_cache_size="0.5Ti",
                model_cache_storage_class="nfs",
            ),
            {
                "accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": "512Gi"}},
                "storageClassName": "nfs",
            },
        ),
        (
            OperatorConfig(model_cache_access_mode="rwx"),
            {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}},
        ),
    ],
)
def test_cache_pvc_intent(config: OperatorConfig, spec: dict[str, Any]) -> None:
    pvc = cache_pvc_intent("ai", config)
    assert pvc == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "llmkube-model-cache",
            "namespace": "ai",
            "labels": {
                "app.kubernetes.io/name": "llmkube",
                "app.kubernetes.io/component": "model-cache",
                "app.kubernetes.io/managed-by": "llmkube-controller",
            },
        },
        "spec": spec,
    }
    assert "ownerReferences" not in pvc["metadata"]  # shared by the namespace: outlives every service


def test_cache_pvc_through_the_planner_uses_the_service_namespace() -> None:
    pvc = plan(isvc=make_isvc(namespace="team-a"), model=make_model()).cache_pvc
    assert pvc is not None and pvc["metadata"]["namespace"] == "team-a"
