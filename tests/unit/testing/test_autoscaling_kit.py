"""The autoscaling kit we ship (docs/autoscaling.md) agrees with itself and with the planner: the
adapter rule of the ConfigMap and of the Helm values is one rule, for the metric the HPA of a
llama.cpp service asks for; the plain scrape job selects what the PodMonitor selects and sets the
labels the rule maps to pods; the node test's Prometheus and adapter run on exactly these files."""

import re
from pathlib import Path
from typing import Any

import yaml
from llmkube_testing.metrics_stack import (
    ADAPTER_CONFIG,
    MONITORING,
    SCRAPE_CONFIG,
    adapter_rules,
    pods_metric_path,
    registration,
    scrape_config,
)

from llmkube.plan.inferenceservice.runtimes import RUNTIME_NAMES, runtime_defaults

ROOT = Path(__file__).resolve().parents[3]
# The runtimes whose servers export the metric their HPA defaults to.
EXPORTING = [name for name in RUNTIME_NAMES if runtime_defaults(name).exports_hpa_metric]
HELM_VALUES = ROOT / "charts" / "llmkube" / "prometheus-adapter-values.yaml"


def test_the_configmap_and_the_helm_values_hold_the_same_rule_for_the_default_metric() -> None:
    configmap = yaml.safe_load(ADAPTER_CONFIG.read_text())
    rules = yaml.safe_load(configmap["data"]["config.yaml"])["rules"]
    assert yaml.safe_load(HELM_VALUES.read_text())["rules"] == {"default": False, "custom": rules}
    (rule,) = rules
    # The series the rule takes: each runtime's default metric and the gauges beside it, never a
    # counter or a histogram's series.
    kept, dropped = re.findall(r'__name__(?:=|!)~"([^"]+)"', rule["seriesQuery"])
    served = [*(runtime_defaults(r).hpa_metric for r in EXPORTING), "llamacpp:requests_deferred"]
    assert sorted(EXPORTING) == ["llamacpp", "llamacpp-router", "sglang", "tgi", "vllm"]
    assert all(re.fullmatch(kept, m) and not re.fullmatch(dropped, m) for m in served), served
    for series in ("llamacpp:tokens_predicted_total", "vllm:e2e_request_latency_seconds_bucket"):
        assert re.fullmatch(dropped, series), series
    assert rule["resources"]["overrides"] == {
        "namespace": {"resource": "namespace"},
        "pod": {"resource": "pod"},
    }
    assert adapter_rules() == configmap["data"]["config.yaml"]


def relabelled_targets(job: dict[str, Any]) -> set[str]:
    return {r["target_label"] for r in job["relabel_configs"] if "target_label" in r}


def test_the_scrape_job_selects_what_the_podmonitor_selects() -> None:
    monitor = yaml.safe_load((MONITORING / "podmonitor.yaml").read_text())
    (expression,) = monitor["spec"]["selector"]["matchExpressions"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (job,) = yaml.safe_load(SCRAPE_CONFIG.read_text())["scrape_configs"]
    keep = {r["source_labels"][0]: r["regex"] for r in job["relabel_configs"] if r.get("action") == "keep"}
    runtimes = keep["__meta_kubernetes_pod_label_inference_llmkube_dev_runtime"]
    assert runtimes.split("|") == expression["values"]
    assert keep["__meta_kubernetes_pod_container_port_name"] == endpoint["port"]
    assert job["metrics_path"] == endpoint["path"] and job["scrape_interval"] == endpoint["interval"]
    podmonitor_labels = {r["targetLabel"] for r in endpoint["relabelings"]} - {"job"}
    # namespace and pod: what the Prometheus Operator adds itself, and what the adapter rule maps.
    assert relabelled_targets(job) == podmonitor_labels | {"namespace", "pod"}
    # the PodMonitor's job label is the plain job's name, which the alerts select on
    (job_label,) = [r["replacement"] for r in endpoint["relabelings"] if r["targetLabel"] == "job"]
    assert job_label == job["job_name"]


def test_the_test_prometheus_runs_the_shipped_job_faster_through_a_kubeconfig() -> None:
    config = scrape_config(Path("/k/admin.kubeconfig"), interval="2s")
    (job,) = config["scrape_configs"]
    (shipped,) = yaml.safe_load(SCRAPE_CONFIG.read_text())["scrape_configs"]
    assert job["relabel_configs"] == shipped["relabel_configs"]
    assert job["scrape_interval"] == "2s"
    assert job["kubernetes_sd_configs"] == [{"role": "pod", "kubeconfig_file": "/k/admin.kubeconfig"}]


def test_the_registration_points_the_api_service_at_the_node_address() -> None:
    namespace, service, endpoints, api_service = registration("10.88.0.1", 6443, b"CA")
    assert namespace["kind"] == "Namespace" and "selector" not in service["spec"]
    (subset,) = endpoints["subsets"]
    assert subset == {"addresses": [{"ip": "10.88.0.1"}], "ports": [{"name": "https", "port": 6443}]}
    assert api_service["metadata"]["name"] == "v1beta1.custom.metrics.k8s.io"
    assert api_service["spec"]["caBundle"] == "Q0E="
    assert api_service["spec"]["service"]["port"] == service["spec"]["ports"][0]["port"]


def test_the_path_the_hpa_reads() -> None:
    path = pods_metric_path("team-a", "llamacpp:requests_processing", "inference.llmkube.dev/service=chat")
    assert path == (
        "/apis/custom.metrics.k8s.io/v1beta1/namespaces/team-a/pods/*/llamacpp:requests_processing"
        "?labelSelector=inference.llmkube.dev/service%3Dchat"
    )
