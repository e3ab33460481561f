"""The HorizontalPodAutoscaler intent, autoscaling/v2, shaped as the reference operator's.

With no explicit metrics the runtime's own load metric is used as a Pods metric with an average
target of 2. Metrics that would make the API server reject the HPA (a Pods metric without a
target, a target that is not a positive quantity, min above max), and metric names the server
accepts but no metrics API can serve, are reported by `hpa_errors` instead of being applied and
retried forever (or left to an HPA that never scales); a Resource metric may use an average value as
well as a utilization (the reference silently dropped it).
"""

import re

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import AutoscalingSpec, InferenceService, MetricSpec
from llmkube.apimachinery.quantity import QuantityError, canonical_quantity, parse_quantity
from llmkube.plan.inferenceservice.names import managed, selector_labels
from llmkube.plan.inferenceservice.objects import object_metadata, owner_reference

DEFAULT_METRIC_TARGET = "2"
RESOURCE_METRICS = ("cpu", "memory")
PROMETHEUS_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


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
        errors += metric_name_errors(metric, path)
        value = metric.target_average_value
        if value is not None:
            try:
                quantity = parse_quantity(value)
            except QuantityError:
                errors.append((f"{path}.targetAverageValue", f'invalid quantity "{value}"'))
                continue
            if quantity.value <= 0:
                errors.append((f"{path}.targetAverageValue", f'"{value}" must be positive'))
        utilization = metric.target_average_utilization
        if metric.type == "Resource" and utilization is not None and utilization < 1:
            errors.append((f"{path}.targetAverageUtilization", f"{utilization} must be greater than 0"))
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


def metric_name_errors(metric: MetricSpec, path: str) -> list[tuple[str, str]]:
    """Names the API server accepts but nothing can serve: a Resource metric comes from the resource
    metrics API, which has cpu and memory; a Pods metric from a custom metrics adapter reading
    Prometheus (the schema's documented requirement), whose series names are Prometheus names."""
    name = metric.name
    if metric.type == "Resource":
        if name not in RESOURCE_METRICS:
            return [
                (
                    f"{path}.name",
                    f'"{name}" is not a resource the resource metrics API serves (it serves cpu and memory)',
                )
            ]
        return []
    if PROMETHEUS_METRIC_NAME.fullmatch(name) is None:
        return [
            (
                f"{path}.name",
                f'"{name}" is not a metric name a custom metrics adapter can serve (a Prometheus name: '
                "letters, digits, '_' and ':', not starting with a digit)",
            )
        ]
    return []


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
