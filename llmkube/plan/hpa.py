"""The HorizontalPodAutoscaler intent, autoscaling/v2 (reference §5).

With no explicit metrics the runtime's own load metric is used as a Pods metric with an average
target of 2. Metrics that would make the API server reject the HPA (a Pods metric without a
target, a target that is not a quantity, min above max) are reported by `hpa_errors` instead of
being applied and retried forever; a Resource metric may use an average value as well as a
utilization (the reference silently dropped it).
"""

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import AutoscalingSpec, InferenceService, MetricSpec
from llmkube.plan.names import managed, selector_labels
from llmkube.plan.objects import object_metadata, owner_reference
from llmkube.plan.quantity import QuantityError, canonical_quantity, parse_quantity

DEFAULT_METRIC_TARGET = "2"


def hpa_errors(autoscaling: AutoscalingSpec | None) -> list[tuple[str, str]]:
    if autoscaling is None:
        return []
    errors: list[tuple[str, str]] = []
    minimum = autoscaling.min_replicas or 1
    if minimum > autoscaling.max_replicas:
        errors.append(
            (
                "spec.autoscaling.minReplicas",
                f"minReplicas {minimum} is greater than maxReplicas {autoscaling.max_replicas}",
            )
        )
    for index, metric in enumerate(autoscaling.metrics or []):
        path = f"spec.autoscaling.metrics[{index}]"
        value = metric.target_average_value
        if value is not None:
            try:
                parse_quantity(value)
            except QuantityError:
                errors.append((f"{path}.targetAverageValue", f'invalid quantity "{value}"'))
                continue
        if metric.type == "Pods" and value is None:
            errors.append(
                (f"{path}.targetAverageValue", f'Pods metric "{metric.name}" needs targetAverageValue')
            )
        if metric.type == "Resource" and value is None and metric.target_average_utilization is None:
            errors.append(
                (
                    path,
                    f'Resource metric "{metric.name}" needs targetAverageUtilization or targetAverageValue',
                )
            )
    return errors


def initial_replicas(replicas: int, autoscaling: AutoscalingSpec) -> int:
    """The count a Deployment is created with when an HPA will own it: `spec.replicas`, within the
    HPA's bounds (the HPA would move it there on its first pass anyway). Never the server's default
    of 1 for a service that asked for more."""
    return max(autoscaling.min_replicas or 1, min(replicas, autoscaling.max_replicas))


def hpa_intent(isvc: InferenceService, autoscaling: AutoscalingSpec, default_metric: str) -> KubeObject:
    """Assumes `hpa_errors(autoscaling)` is empty."""
    name = isvc.metadata.name or ""
    metrics = [metric_spec(m) for m in autoscaling.metrics or []] or [
        pods_metric(default_metric, DEFAULT_METRIC_TARGET)
    ]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": object_metadata(
            name, isvc.metadata.namespace or "", managed(selector_labels(name)), owner_reference(isvc)
        ),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": autoscaling.min_replicas or 1,
            "maxReplicas": autoscaling.max_replicas,
            "metrics": metrics,
        },
    }


def pods_metric(name: str, average_value: str) -> KubeObject:
    return {
        "type": "Pods",
        "pods": {
            "metric": {"name": name},
            "target": {"type": "AverageValue", "averageValue": canonical_quantity(average_value)},
        },
    }


def metric_spec(metric: MetricSpec) -> KubeObject:
    if metric.type == "Pods":
        return pods_metric(metric.name, metric.target_average_value or "")
    if metric.target_average_utilization is not None:
        target: KubeObject = {"type": "Utilization", "averageUtilization": metric.target_average_utilization}
    else:
        target = {
            "type": "AverageValue",
            "averageValue": canonical_quantity(metric.target_average_value or ""),
        }
    return {"type": "Resource", "resource": {"name": metric.name, "target": target}}
