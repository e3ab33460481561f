"""A field the API server names in an object we built, mapped to the InferenceService field it came
from (the safety net for refusals the planner did not foresee, and how the planner's own object
checks are reported)."""

from typing import Any

import pytest
from isvc_factories import gpu_model, make_isvc
from isvc_planning import plan

from llmkube.plan.inferenceservice.field_origins import describe, isvc_field

USER_ENV = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]

# (case, spec, GPU model?, kind, path the server names, InferenceService field or None)
TABLE: list[tuple[str, dict[str, Any], bool, str, str, str | None]] = [
    (
        "user env after generated",
        {"runtime": "tgi", "tgiConfig": {"hfTokenSecretRef": {"name": "s", "key": "k"}}, "env": USER_ENV},
        False,
        "Deployment",
        "spec.template.spec.containers[0].env[2].name",
        "spec.env[0].name",
    ),
    (
        "HOME is ours",
        {"env": USER_ENV},
        False,
        "Deployment",
        "spec.template.spec.containers[0].env[0].value",
        None,
    ),
    (
        "user env",
        {"env": USER_ENV},
        False,
        "Deployment",
        "spec.template.spec.containers[0].env[2].value",
        "spec.env[1].value",
    ),
    (
        "generated Secret reference",
        {"runtime": "tgi", "tgiConfig": {"hfTokenSecretRef": {"name": "s", "key": "k"}}, "env": USER_ENV},
        False,
        "Deployment",
        "spec.template.spec.containers[0].env[1].valueFrom.secretKeyRef.key",
        "spec.tgiConfig.hfTokenSecretRef.key",
    ),
    (
        "GPU toleration is ours",
        {"tolerations": [{"key": "a", "operator": "Exists"}]},
        True,
        "Deployment",
        "spec.template.spec.tolerations[0].key",
        None,
    ),
    (
        "user toleration after the GPU one",
        {"tolerations": [{"key": "a", "operator": "Exists"}]},
        True,
        "Deployment",
        "spec.template.spec.tolerations[1].key",
        "spec.tolerations[0].key",
    ),
    (
        "user toleration without GPU",
        {"tolerations": [{"key": "a", "operator": "Exists"}]},
        False,
        "Deployment",
        "spec.template.spec.tolerations[0].effect",
        "spec.tolerations[0].effect",
    ),
    ("pod labels", {}, False, "Deployment", "spec.template.labels", "spec.podLabels"),
    (
        "pod annotation key",
        {},
        False,
        "Deployment",
        "spec.template.annotations[a/b]",
        "spec.podAnnotations[a/b]",
    ),
    ("node selector", {}, False, "Deployment", "spec.template.spec.nodeSelector", "spec.nodeSelector"),
    (
        "image pull secret",
        {},
        False,
        "Deployment",
        "spec.template.spec.imagePullSecrets[2].name",
        "spec.imagePullSecrets[2].name",
    ),
    (
        "runtime class",
        {},
        False,
        "Deployment",
        "spec.template.spec.runtimeClassName",
        "spec.runtimeClassName",
    ),
    (
        "priority class from priority",
        {},
        False,
        "Deployment",
        "spec.template.spec.priorityClassName",
        "spec.priority",
    ),
    (
        "priority class named",
        {"priorityClassName": "llmkube-high"},
        False,
        "Deployment",
        "spec.template.spec.priorityClassName",
        "spec.priorityClassName",
    ),
    (
        "default pod security context is ours",
        {},
        False,
        "Deployment",
        "spec.template.spec.securityContext.seccompProfile.type",
        None,
    ),
    (
        "user pod security context",
        {"podSecurityContext": {"fsGroup": 1}},
        False,
        "Deployment",
        "spec.template.spec.securityContext.fsGroup",
        "spec.podSecurityContext.fsGroup",
    ),
    (
        "user container security context",
        {"securityContext": {"runAsUser": 1}},
        False,
        "Deployment",
        "spec.template.spec.containers[0].securityContext.runAsUser",
        "spec.securityContext.runAsUser",
    ),
    (
        "default probe is ours",
        {},
        False,
        "Deployment",
        "spec.template.spec.containers[0].livenessProbe",
        None,
    ),
    (
        "probe override",
        {"probeOverrides": {"startup": {"tcpSocket": {"port": 1}}}},
        False,
        "Deployment",
        "spec.template.spec.containers[0].startupProbe.tcpSocket.port",
        "spec.probeOverrides.startup.tcpSocket.port",
    ),
    ("image", {}, False, "Deployment", "spec.template.spec.containers[0].image", "spec.image"),
    (
        "resources",
        {},
        False,
        "Deployment",
        "spec.template.spec.containers[0].resources.requests[cpu]",
        "spec.resources",
    ),
    (
        "container port",
        {"containerPort": 9000},
        False,
        "Deployment",
        "spec.template.spec.containers[0].ports[0].containerPort",
        "spec.containerPort",
    ),
    ("volumes are ours", {}, False, "Deployment", "spec.template.spec.volumes[0].name", None),
    ("init container is ours", {}, False, "Deployment", "spec.template.spec.initContainers[0].image", None),
    ("replicas", {}, False, "Deployment", "spec.replicas", "spec.replicas"),
    ("labels of the object", {}, False, "Deployment", "metadata.labels", "metadata.name"),
    ("Service type", {}, False, "Service", "spec.type", "spec.endpoint.type"),
    ("Service port", {}, False, "Service", "spec.ports[0].port", "spec.endpoint.port"),
    ("Service node port is ours", {}, False, "Service", "spec.ports[0].nodePort", None),
    (
        "HPA bounds",
        {"autoscaling": {"maxReplicas": 2}},
        False,
        "HorizontalPodAutoscaler",
        "spec.minReplicas",
        "spec.autoscaling.minReplicas",
    ),
    (
        "HPA metric name",
        {
            "autoscaling": {
                "maxReplicas": 2,
                "metrics": [{"type": "Pods", "name": "q", "targetAverageValue": "1"}],
            }
        },
        False,
        "HorizontalPodAutoscaler",
        "spec.metrics[0].pods.metric.name",
        "spec.autoscaling.metrics[0].name",
    ),
    (
        "HPA metric target",
        {
            "autoscaling": {
                "maxReplicas": 2,
                "metrics": [{"type": "Resource", "name": "cpu", "targetAverageUtilization": 5}],
            }
        },
        False,
        "HorizontalPodAutoscaler",
        "spec.metrics[0].resource.target.averageUtilization",
        "spec.autoscaling.metrics[0].targetAverageUtilization",
    ),
    (
        "HPA default metric is ours",
        {"autoscaling": {"maxReplicas": 2}},
        False,
        "HorizontalPodAutoscaler",
        "spec.metrics[0].pods.metric.name",
        None,
    ),
    ("claim is the operator's", {}, False, "PersistentVolumeClaim", "spec.resources.requests[storage]", None),
]


@pytest.mark.parametrize(
    ("case", "spec", "gpu", "kind", "path", "expected"), TABLE, ids=[row[0] for row in TABLE]
)
def test_a_refused_field_maps_to_the_service_field_it_came_from(
    case: str, spec: dict[str, Any], gpu: bool, kind: str, path: str, expected: str | None
) -> None:
    isvc = make_isvc(spec)
    result = plan(isvc=isvc, model=gpu_model() if gpu else None) if gpu else plan(isvc=isvc)
    sent = {"Deployment": result.deployment, "Service": result.service}.get(kind)
    if kind == "Deployment":
        assert sent is not None, result.status.conditions
    assert isvc_field(kind, path, isvc.spec, sent) == expected


def test_a_field_of_our_own_is_described_as_such() -> None:
    isvc = make_isvc({})
    assert describe("Deployment", "spec.template.spec.volumes[0].name", isvc.spec, None) == (
        "Deployment spec.template.spec.volumes[0].name (set by the controller)"
    )
    assert describe("Deployment", "", isvc.spec, None) == "Deployment (object) (set by the controller)"


def test_the_user_env_index_is_the_users_whatever_the_runtime_generates() -> None:
    """vLLM generates variables, llama.cpp fewer: the user's first entry is spec.env[0] either way."""
    for runtime in ("llamacpp", "vllm", "tgi"):
        isvc = make_isvc({"runtime": runtime, "env": USER_ENV})
        result = plan(isvc=isvc)
        assert result.deployment is not None
        env = result.deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        index = next(i for i, var in enumerate(env) if var["name"] == "A")
        path = f"spec.template.spec.containers[0].env[{index}].name"
        assert isvc_field("Deployment", path, isvc.spec, result.deployment) == "spec.env[0].name"
