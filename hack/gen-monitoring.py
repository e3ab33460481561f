#!/usr/bin/env python3
"""Write the monitoring kit's generated files: manifests/monitoring/prometheusrule.yaml and
manifests/monitoring/dashboards/*.json (and their copies in charts/llmkube, see gen-chart.py).

Alerts and dashboard queries are written here, against METRICS: the one list of metric names they
use. A renamed metric is a one-line change there (then run this script); the tests scrape a running
controller and fail on any name in a query that the controller does not export.
"""

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
MONITORING = ROOT / "manifests" / "monitoring"

#: The `job` label of the controller's series: the ServiceMonitor sets it whatever the Service is called.
JOB = "llmkube-controller"
#: The `job` labels the PodMonitors set on the inference pods' and the router pods' series (and the
#: plain scrape config's job name, manifests/monitoring/prometheus-scrape-config.yaml).
INFERENCE_JOB = "llmkube-inference"
ROUTER_JOB = "llmkube-router"
LEASE = "882d6afe.llmkube.dev"

#: Every controller metric the alerts and dashboards use (controller-runtime's names, process
#: metrics, and llmkube's own), by role.
METRICS = {
    "reconcile_total": "controller_runtime_reconcile_total",
    "reconcile_errors": "controller_runtime_reconcile_errors_total",
    "reconcile_time": "controller_runtime_reconcile_time_seconds",
    "active_workers": "controller_runtime_active_workers",
    "max_workers": "controller_runtime_max_concurrent_reconciles",
    "queue_depth": "workqueue_depth",
    "queue_adds": "workqueue_adds_total",
    "queue_retries": "workqueue_retries_total",
    "queue_latency": "workqueue_queue_duration_seconds",
    "queue_work": "workqueue_work_duration_seconds",
    "queue_longest": "workqueue_longest_running_processor_seconds",
    "leader": "leader_election_master_status",
    "rest_requests": "rest_client_requests_total",
    "memory": "process_resident_memory_bytes",
    "cpu": "process_cpu_seconds_total",
    "isvc_phase": "llmkube_inferenceservice_phase",
    "isvc_info": "llmkube_inferenceservice_info",
    "isvc_replicas": "llmkube_inferenceservice_replicas",
    "isvc_gpus": "llmkube_inferenceservice_gpus_per_replica",
    "isvc_ready_duration": "llmkube_inferenceservice_ready_duration_seconds",
    "gpu_queue_depth": "llmkube_gpu_queue_depth",
    "gpu_queue_wait": "llmkube_gpu_queue_wait_duration_seconds",
    "model_status": "llmkube_model_status",
    "model_download": "llmkube_model_download_duration_seconds",
}

#: What the router pods of a ModelRouter export (llmkube/router/metrics.py), by role; a test reads
#: a running router's /metrics and fails on any name here it does not export.
ROUTER_METRICS = {
    "requests": "llmkube_router_requests_total",
    "duration": "llmkube_router_request_duration_seconds",
    "first_byte": "llmkube_router_time_to_first_byte_seconds",
    "refused": "llmkube_router_refused_requests_total",
    "upstream_failures": "llmkube_router_upstream_failures_total",
    "healthy": "llmkube_router_backend_healthy",
    "endpoints": "llmkube_router_backend_endpoints",
    "in_flight": "llmkube_router_in_flight_requests",
    "waiting": "llmkube_router_waiting_requests",
    "budget_remaining": "llmkube_router_budget_remaining",
    "tokens": "llmkube_router_tokens_total",
    "cost": "llmkube_router_cost_usd_total",
    "connections": "llmkube_router_open_connections",
}

#: What the inference runtimes export (scraped by the PodMonitor); from their documentation, since no
#: runtime runs in our tests. llama.cpp needs `--metrics`, which llmkube always passes.
RUNTIME_METRICS = {
    "llamacpp": [
        "llamacpp:prompt_tokens_total",
        "llamacpp:tokens_predicted_total",
        "llamacpp:prompt_tokens_seconds",
        "llamacpp:predicted_tokens_seconds",
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
    ],
    "vllm": [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
    ],
    "tgi": [
        "tgi_queue_size",
        "tgi_batch_current_size",
        "tgi_request_count",
        "tgi_request_generated_tokens_sum",
        "tgi_request_input_length_sum",
        "tgi_request_duration_bucket",
    ],
}

#: The project's repository (the chart's `home`, the image's ghcr.io/llmkube/llmkube).
REPOSITORY = "https://github.com/llmkube/llmkube"
#: Where each alert's runbook_url points: a heading of docs/operations.md per alert (its anchor is
#: the alert's name in lower case), in this repository. The chart's monitoring.runbookBaseURL
#: replaces this base (a mirror, your own docs site); with kustomize, patch it.
RUNBOOK_BASE = f"{REPOSITORY}/blob/main/docs/operations.md"

M = METRICS
RM = ROUTER_METRICS
C = f'job="{JOB}"'
RJ = f'job="{ROUTER_JOB}"'
R = "[$__rate_interval]"  # Grafana picks the rate window from the scrape interval


def alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{RUNBOOK_BASE}#{name.lower()}",
        },
    }


def rule_groups() -> list[dict[str, Any]]:
    controller = [
        alert(
            "LLMKubeControllerDown",
            f"absent(up{{{C}}} == 1)",
            "5m",
            "critical",
            "No llmkube controller is being scraped",
            "No replica of the llmkube controller has answered a scrape for 5 minutes: nothing reconciles "
            "InferenceServices or Models.",
        ),
        alert(
            "LLMKubeNoLeader",
            f'sum(up{{{C}}}) > 0 and max({M["leader"]}{{{C},name="{LEASE}"}}) < 1',
            "5m",
            "critical",
            "llmkube controller replicas run, but none leads",
            f"Controller replicas are up but none holds the lease {LEASE} for 5 minutes: no "
            "replica reconciles. Check the Lease in the controller's namespace and the controller logs.",
        ),
        alert(
            "LLMKubeReconcileErrors",
            f"sum by (controller) (rate({M['reconcile_errors']}{{{C}}}[5m]))"
            f" / sum by (controller) (rate({M['reconcile_total']}{{{C}}}[5m])) > 0.1",
            "15m",
            "warning",
            "llmkube {{ $labels.controller }} reconciles fail",
            "More than 10% of the {{ $labels.controller }} controller's reconciles returned an error over "
            "15 minutes ({{ $value | humanizePercentage }}). The controller logs name the objects.",
        ),
        alert(
            "LLMKubeWorkqueueDepthHigh",
            f"sum by (name) ({M['queue_depth']}{{{C}}}) > 100",
            "15m",
            "warning",
            "llmkube {{ $labels.name }} queue keeps growing",
            "{{ $value }} objects have waited in the {{ $labels.name }} work queue for 15 minutes: the "
            "controller does not keep up (too few --workers, or a slow API server).",
        ),
        alert(
            "LLMKubeWorkqueueLatencyHigh",
            "histogram_quantile(0.99, sum by (name, le) "
            f"(rate({M['queue_latency']}_bucket{{{C}}}[5m]))) > 60",
            "15m",
            "warning",
            "llmkube {{ $labels.name }} queue latency is high",
            "The 99th percentile of the time an object waits in the {{ $labels.name }} queue has been "
            "above 60 s for 15 minutes ({{ $value | humanizeDuration }}).",
        ),
        alert(
            "LLMKubeReconcileStuck",
            f"max by (name) ({M['queue_longest']}{{{C}}}) > 600",
            "5m",
            "warning",
            "an llmkube {{ $labels.name }} reconcile has been running for more than 10 minutes",
            "A worker of the {{ $labels.name }} controller has been busy with one object for "
            "{{ $value | humanizeDuration }}: it is stuck (a hung API call or model copy).",
        ),
    ]
    services = [
        alert(
            "LLMKubeInferenceServiceFailed",
            f'max by (namespace, inferenceservice) ({M["isvc_phase"]}{{{C},phase="Failed"}}) == 1',
            "5m",
            "warning",
            "InferenceService {{ $labels.namespace }}/{{ $labels.inferenceservice }} is Failed",
            "The service's status.conditions (Degraded) say why: an invalid spec, a missing Model, or an "
            "API error. `kubectl describe isvc -n {{ $labels.namespace }} {{ $labels.inferenceservice }}`.",
        ),
        alert(
            "LLMKubeInferenceServiceWaitingForGPU",
            f'max by (namespace, inferenceservice) ({M["isvc_phase"]}{{{C},phase="WaitingForGPU"}}) == 1',
            "30m",
            "warning",
            "InferenceService {{ $labels.namespace }}/{{ $labels.inferenceservice }} waits for GPUs",
            "The service has been queued for GPUs for 30 minutes: no node has the free accelerators it "
            "asks for. status.queuePosition and status.waitingFor tell where it stands.",
        ),
        alert(
            "LLMKubeInferenceServiceNotReady",
            f"max by (namespace, inferenceservice) "
            f'({M["isvc_phase"]}{{{C},phase=~"Pending|Creating|Progressing"}}) == 1',
            "30m",
            "warning",
            "InferenceService {{ $labels.namespace }}/{{ $labels.inferenceservice }} is not Ready",
            "The service has been Pending, Creating or Progressing for 30 minutes (image pulls, a model "
            "download, failing probes or an unschedulable pod). Its conditions and events say which.",
        ),
        alert(
            "LLMKubeModelFailed",
            f'max by (namespace, model) ({M["model_status"]}{{{C},phase="Failed"}}) == 1',
            "5m",
            "warning",
            "Model {{ $labels.namespace }}/{{ $labels.model }} is Failed",
            "The Model could not be fetched or copied (an unreachable or unsupported source, a missing "
            "claim, an integrity failure). Its Degraded condition has the reason.",
        ),
        alert(
            "LLMKubeInferencePodNotServing",
            # A pod the PodMonitor finds has an address (it runs); up 0 means its server does not
            # answer on the service port: still loading a model, hung, or crash-looping between scrapes.
            f'max by (namespace, inferenceservice, pod) (up{{job="{INFERENCE_JOB}"}}) == 0',
            "15m",
            "warning",
            "Inference pod {{ $labels.namespace }}/{{ $labels.pod }} runs but does not serve",
            "The inference server of {{ $labels.namespace }}/{{ $labels.inferenceservice }} in pod "
            "{{ $labels.pod }} has not answered on its service port for 15 minutes, although the pod runs: "
            "a model still loading, a hung server, or one that restarts. `kubectl logs -n "
            "{{ $labels.namespace }} {{ $labels.pod }}`.",
        ),
    ]
    by = "sum by (namespace, router)"
    routers = [
        alert(
            "LLMKubeRouterErrors",
            f'{by} (rate({RM["requests"]}{{{RJ},code=~"5.."}}[5m]))'
            f" / {by} (rate({RM['requests']}{{{RJ}}}[5m])) > 0.05",
            "10m",
            "warning",
            "ModelRouter {{ $labels.namespace }}/{{ $labels.router }} answers with 5xx",
            "More than 5% of the answers of ModelRouter {{ $labels.namespace }}/{{ $labels.router }} have "
            "been 5xx for 10 minutes ({{ $value | humanizePercentage }}): backends failing (502, 504) or "
            "none able to serve (503). llmkube_router_upstream_failures_total and the refusals by reason "
            "say which.",
        ),
        alert(
            "LLMKubeRouterFailClosed",
            f'{by} (rate({RM["refused"]}{{{RJ},reason="fail_closed"}}[5m])) > 0',
            "5m",
            "warning",
            "ModelRouter {{ $labels.namespace }}/{{ $labels.router }} refuses sensitive requests",
            "ModelRouter {{ $labels.namespace }}/{{ $labels.router }} has answered fail-closed (503) for "
            "5 minutes: a rule with failClosed has no backend that can serve, and its requests may not go "
            "elsewhere. The rule's backends: `kubectl describe mr -n {{ $labels.namespace }} "
            "{{ $labels.router }}`.",
        ),
        alert(
            "LLMKubeRouterBudgetExhausted",
            f'{by} (rate({RM["refused"]}{{{RJ},reason="budget"}}[5m])) > 0',
            "5m",
            "warning",
            "ModelRouter {{ $labels.namespace }}/{{ $labels.router }} refuses requests over budget",
            "ModelRouter {{ $labels.namespace }}/{{ $labels.router }} has answered 429 budget_exceeded for 5 "
            "minutes: a budget is used up for its window. llmkube_router_budget_remaining and the "
            "ModelRouter's status.budgetUtilization show which.",
        ),
        alert(
            "LLMKubeRouterBackendUnavailable",
            f"max by (namespace, router, backend) ({RM['healthy']}{{{RJ}}}) == 0",
            "5m",
            "warning",
            "Backend {{ $labels.backend }} of ModelRouter {{ $labels.namespace }}/{{ $labels.router }} "
            "cannot serve",
            "No router replica of {{ $labels.namespace }}/{{ $labels.router }} has been able to send to "
            "backend {{ $labels.backend }} for 5 minutes: every endpoint is quarantined after failed "
            "requests or health probes, or (an InferenceService backend) none is ready "
            "(llmkube_router_backend_endpoints).",
        ),
    ]
    return [
        {"name": "llmkube-controller", "rules": controller},
        {"name": "llmkube-inference", "rules": services},
        {"name": "llmkube-router", "rules": routers},
    ]


def prometheus_rule() -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "llmkube",
            "namespace": "llmkube-system",
            "labels": {"app.kubernetes.io/name": "llmkube", "app.kubernetes.io/component": "monitoring"},
        },
        "spec": {"groups": rule_groups()},
    }


# --- dashboards ----------------------------------------------------------------------------------

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def panel(
    title: str, targets: list[tuple[str, str]], x: int, y: int, *, w: int = 12, h: int = 8, **options: Any
) -> dict[str, Any]:
    kind = options.pop("type", "timeseries")
    unit = options.pop("unit", "short")
    return {
        "type": kind,
        "title": title,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + index), "expr": expr, "legendFormat": legend, "datasource": DATASOURCE}
            for index, (expr, legend) in enumerate(targets)
        ],
        **options,
    }


def variable(name: str, query: str, *, include_all: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": name},
        "refresh": 2,
        "includeAll": include_all,
        "multi": include_all,
        "current": {},
    }


def dashboard(
    uid: str, title: str, panels: list[dict[str, Any]], variables: list[dict[str, Any]]
) -> dict[str, Any]:
    datasource = {"name": "datasource", "type": "datasource", "query": "prometheus", "current": {}}
    for index, item in enumerate(panels, start=1):
        item["id"] = index
    return {
        "uid": uid,
        "title": title,
        "tags": ["llmkube"],
        "editable": True,
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [datasource, *variables]},
        "panels": panels,
    }


def controller_dashboard() -> dict[str, Any]:
    by = "sum by (controller)"
    panels = [
        panel(
            "Reconciles per second by result",
            [(f"sum by (controller, result) (rate({M['reconcile_total']}{{{C}}}{R}))",
              "{{controller}} {{result}}")],
            0, 0, unit="ops",
        ),
        panel(
            "Reconcile errors per second",
            [(f"{by} (rate({M['reconcile_errors']}{{{C}}}{R}))", "{{controller}}")],
            12, 0, unit="ops",
        ),
        panel(
            "Reconcile duration (p50, p99)",
            [
                (f"histogram_quantile(0.5, sum by (controller, le) "
                 f"(rate({M['reconcile_time']}_bucket{{{C}}}{R})))", "p50 {{controller}}"),
                (f"histogram_quantile(0.99, sum by (controller, le) "
                 f"(rate({M['reconcile_time']}_bucket{{{C}}}{R})))", "p99 {{controller}}"),
            ],
            0, 8, unit="s",
        ),
        panel(
            "Busy workers",
            [
                (f"{by} ({M['active_workers']}{{{C}}})", "busy {{controller}}"),
                (f"{by} ({M['max_workers']}{{{C}}})", "max {{controller}}"),
            ],
            12, 8,
        ),
        panel(
            "Work queue depth and adds",
            [
                (f"sum by (name) ({M['queue_depth']}{{{C}}})", "depth {{name}}"),
                (f"sum by (name) (rate({M['queue_adds']}{{{C}}}{R}))", "adds/s {{name}}"),
            ],
            0, 16,
        ),
        panel(
            "Work queue wait and work time (p99), retries",
            [
                (f"histogram_quantile(0.99, sum by (name, le) "
                 f"(rate({M['queue_latency']}_bucket{{{C}}}{R})))", "wait p99 {{name}}"),
                (f"histogram_quantile(0.99, sum by (name, le) "
                 f"(rate({M['queue_work']}_bucket{{{C}}}{R})))", "work p99 {{name}}"),
                (f"sum by (name) (rate({M['queue_retries']}{{{C}}}{R}))", "retries/s {{name}}"),
            ],
            12, 16,
        ),
        panel(
            "Leader",
            [(f'{M["leader"]}{{{C},name="{LEASE}"}}', "{{pod}}")],
            0, 24, w=6, type="stat",
        ),
        panel(
            "API requests per second by code",
            [(f"sum by (code, method) (rate({M['rest_requests']}{{{C}}}{R}))",
              "{{method}} {{code}}")],
            6, 24, w=18, unit="reqps",
        ),
        panel(
            "Memory (RSS)",
            [(f"{M['memory']}{{{C}}}", "{{pod}}")],
            0, 32, unit="bytes",
        ),
        panel(
            "CPU",
            [(f"rate({M['cpu']}{{{C}}}{R})", "{{pod}}")],
            12, 32, unit="cores",
        ),
    ]  # fmt: skip
    return dashboard("llmkube-controller", "llmkube / Controller", panels, [])


def services_dashboard() -> dict[str, Any]:
    ns = f'{C},namespace=~"$namespace"'
    panels = [
        panel(
            "InferenceServices by phase",
            [(f"sum by (phase) ({M['isvc_phase']}{{{ns}}})", "{{phase}}")],
            0, 0, type="timeseries",
        ),
        panel(
            "Services waiting for GPUs",
            [(f"max({M['gpu_queue_depth']}{{{C}}})", "waiting")],
            12, 0, w=6, type="stat",
        ),
        panel(
            "Time in the GPU queue (p90)",
            [(f"histogram_quantile(0.9, sum by (le) "
              f"(rate({M['gpu_queue_wait']}_bucket{{{ns}}}{R})))", "p90")],
            18, 0, w=6, type="stat", unit="s",
        ),
        panel(
            "Services that are not Ready",
            [(f'max by (namespace, inferenceservice, phase) ({M["isvc_phase"]}{{{ns},phase!="Ready"}}) == 1',
              "{{namespace}}/{{inferenceservice}} {{phase}}")],
            0, 8, w=24, type="table",
        ),
        panel(
            "Time from creation to first Ready (p50, p90)",
            [
                (f"histogram_quantile(0.5, sum by (le) "
                 f"(rate({M['isvc_ready_duration']}_bucket{{{ns}}}{R})))", "p50"),
                (f"histogram_quantile(0.9, sum by (le) "
                 f"(rate({M['isvc_ready_duration']}_bucket{{{ns}}}{R})))", "p90"),
            ],
            0, 16, unit="s",
        ),
        panel(
            "Models by phase",
            [(f"sum by (phase) ({M['model_status']}{{{ns}}})", "{{phase}}")],
            12, 16,
        ),
        panel(
            "Model copy duration (p90)",
            [(f"histogram_quantile(0.9, sum by (le, source_type) "
              f"(rate({M['model_download']}_bucket{{{ns}}}{R})))", "{{source_type}}")],
            0, 24, w=24, unit="s",
        ),
        panel(
            "Services by runtime and accelerator",
            [(f"count by (runtime, accelerator) ({M['isvc_info']}{{{ns}}})",
              "{{runtime}} {{accelerator}}")],
            0, 32, w=8,
        ),
        panel(
            "Replicas ready and desired",
            [(f"sum by (namespace, inferenceservice, state) "
              f'({M["isvc_replicas"]}{{{ns},state=~"ready|desired"}})',
              "{{namespace}}/{{inferenceservice}} {{state}}")],
            8, 32, w=8,
        ),
        panel(
            "GPUs requested by running replicas",
            [(f"sum by (namespace, inferenceservice) ({M['isvc_gpus']}{{{ns}}}"
              f" * on (namespace, inferenceservice) "
              f'{M["isvc_replicas"]}{{{ns},state="running"}})', "{{namespace}}/{{inferenceservice}}")],
            16, 32, w=8,
        ),
    ]  # fmt: skip
    variables = [variable("namespace", f"label_values({M['isvc_phase']}{{{C}}}, namespace)")]
    return dashboard("llmkube-services", "llmkube / Services and GPU queue", panels, variables)


def inference_dashboard() -> dict[str, Any]:
    """Per-model figures from the runtimes themselves, scraped by the PodMonitor (which labels each
    series with `inferenceservice`, `model` and `runtime`)."""
    sel = 'namespace=~"$namespace",inferenceservice=~"$inferenceservice"'
    by = "sum by (namespace, inferenceservice)"
    leg = "{{namespace}}/{{inferenceservice}}"
    panels = [
        panel(
            "Requests in flight",
            [
                (f"{by} (llamacpp:requests_processing{{{sel}}})", f"{leg} llama.cpp"),
                (f"{by} (vllm:num_requests_running{{{sel}}})", f"{leg} vLLM"),
                (f"{by} (tgi_batch_current_size{{{sel}}})", f"{leg} TGI"),
            ],
            0, 0,
        ),
        panel(
            "Requests waiting",
            [
                (f"{by} (llamacpp:requests_deferred{{{sel}}})", f"{leg} llama.cpp"),
                (f"{by} (vllm:num_requests_waiting{{{sel}}})", f"{leg} vLLM"),
                (f"{by} (tgi_queue_size{{{sel}}})", f"{leg} TGI"),
            ],
            12, 0,
        ),
        panel(
            "Generated tokens per second",
            [
                (f"{by} (rate(llamacpp:tokens_predicted_total{{{sel}}}{R}))", f"{leg} llama.cpp"),
                (f"{by} (rate(vllm:generation_tokens_total{{{sel}}}{R}))", f"{leg} vLLM"),
                (f"{by} (rate(tgi_request_generated_tokens_sum{{{sel}}}{R}))", f"{leg} TGI"),
            ],
            0, 8,
        ),
        panel(
            "Prompt tokens per second",
            [
                (f"{by} (rate(llamacpp:prompt_tokens_total{{{sel}}}{R}))", f"{leg} llama.cpp"),
                (f"{by} (rate(vllm:prompt_tokens_total{{{sel}}}{R}))", f"{leg} vLLM"),
                (f"{by} (rate(tgi_request_input_length_sum{{{sel}}}{R}))", f"{leg} TGI"),
            ],
            12, 8,
        ),
        panel(
            "llama.cpp throughput per replica (tokens/s)",
            [
                (f"llamacpp:predicted_tokens_seconds{{{sel}}}", "{{pod}} generation"),
                (f"llamacpp:prompt_tokens_seconds{{{sel}}}", "{{pod}} prompt"),
            ],
            0, 16,
        ),
        panel(
            "vLLM KV-cache usage",
            [(f"max by (namespace, inferenceservice) (vllm:kv_cache_usage_perc{{{sel}}})", leg)],
            12, 16, unit="percentunit",
        ),
        panel(
            "Time to first token (p90, vLLM)",
            [(f"histogram_quantile(0.9, sum by (namespace, inferenceservice, le) "
              f"(rate(vllm:time_to_first_token_seconds_bucket{{{sel}}}{R})))", leg)],
            0, 24, unit="s",
        ),
        panel(
            "Request latency (p90, vLLM and TGI)",
            [
                (f"histogram_quantile(0.9, sum by (namespace, inferenceservice, le) "
                 f"(rate(vllm:e2e_request_latency_seconds_bucket{{{sel}}}{R})))", f"{leg} vLLM"),
                (f"histogram_quantile(0.9, sum by (namespace, inferenceservice, le) "
                 f"(rate(tgi_request_duration_bucket{{{sel}}}{R})))", f"{leg} TGI"),
            ],
            12, 24, unit="s",
        ),
        panel(
            "Requests per second (TGI)",
            [(f"{by} (rate(tgi_request_count{{{sel}}}{R}))", leg)],
            0, 32, w=24, unit="reqps",
        ),
    ]  # fmt: skip
    variables = [
        variable("namespace", 'label_values(up{inferenceservice!=""}, namespace)'),
        variable(
            "inferenceservice",
            'label_values(up{namespace=~"$namespace",inferenceservice!=""}, inferenceservice)',
        ),
    ]
    return dashboard("llmkube-inference", "llmkube / Inference", panels, variables)


def router_dashboard() -> dict[str, Any]:
    """The router pods of each ModelRouter, scraped by the PodMonitor `llmkube-router`."""
    sel = f'{RJ},namespace=~"$namespace",router=~"$router"'
    by = "sum by (namespace, router)"
    leg = "{{namespace}}/{{router}}"
    panels = [
        panel(
            "Requests per second by code",
            [(f"sum by (namespace, router, code) (rate({RM['requests']}{{{sel}}}{R}))",
              f"{leg} {{{{code}}}}")],
            0, 0, unit="reqps",
        ),
        panel(
            "5xx answers (share)",
            [(f'{by} (rate({RM["requests"]}{{{sel},code=~"5.."}}{R}))'
              f' / {by} (rate({RM["requests"]}{{{sel}}}{R}))', leg)],
            12, 0, unit="percentunit",
        ),
        panel(
            "Answer duration and time to first byte (p50, p99)",
            [
                (f"histogram_quantile(0.5, sum by (namespace, router, le) "
                 f"(rate({RM['duration']}_bucket{{{sel}}}{R})))", f"{leg} p50"),
                (f"histogram_quantile(0.99, sum by (namespace, router, le) "
                 f"(rate({RM['duration']}_bucket{{{sel}}}{R})))", f"{leg} p99"),
                (f"histogram_quantile(0.5, sum by (namespace, router, le) "
                 f"(rate({RM['first_byte']}_bucket{{{sel}}}{R})))", f"{leg} first byte p50"),
            ],
            0, 8, unit="s",
        ),
        panel(
            "Refused by the router, by reason (fail_closed, budget, ...)",
            [(f"sum by (namespace, router, reason) (rate({RM['refused']}{{{sel}}}{R}))",
              f"{leg} {{{{reason}}}}")],
            12, 8, unit="reqps",
        ),
        panel(
            "Backends that can serve",
            [(f"max by (namespace, router, backend) ({RM['healthy']}{{{sel}}})", f"{leg} {{{{backend}}}}")],
            0, 16, w=8,
        ),
        panel(
            "Ready endpoints per backend",
            [(f"max by (namespace, router, backend) ({RM['endpoints']}{{{sel}}})", f"{leg} {{{{backend}}}}")],
            8, 16, w=8,
        ),
        panel(
            "Failed attempts by backend and reason",
            [(f"sum by (namespace, router, backend, reason) (rate({RM['upstream_failures']}{{{sel}}}{R}))",
              f"{leg} {{{{backend}}}} {{{{reason}}}}")],
            16, 16, w=8, unit="ops",
        ),
        panel(
            "In flight per backend, and waiting for an endpoint",
            [
                (f"sum by (namespace, router, backend) ({RM['in_flight']}{{{sel}}})",
                 f"{leg} {{{{backend}}}}"),
                (f"{by} ({RM['waiting']}{{{sel}}})", f"{leg} waiting"),
            ],
            0, 24,
        ),
        panel(
            "Budget left in its window",
            [(f"min by (namespace, router, budget, unit) ({RM['budget_remaining']}{{{sel}}})",
              f"{leg} {{{{budget}}}} ({{{{unit}}}})")],
            12, 24,
        ),
        panel(
            "Tokens per second by backend",
            [(f"sum by (namespace, router, backend, kind) (rate({RM['tokens']}{{{sel}}}{R}))",
              f"{leg} {{{{backend}}}} {{{{kind}}}}")],
            0, 32, w=8,
        ),
        panel(
            "Cost per hour by backend (USD)",
            [(f"sum by (namespace, router, backend) (rate({RM['cost']}{{{sel}}}{R})) * 3600",
              f"{leg} {{{{backend}}}}")],
            8, 32, w=8, unit="currencyUSD",
        ),
        panel(
            "Open client connections",
            [(f"{by} ({RM['connections']}{{{sel}}})", leg)],
            16, 32, w=8,
        ),
    ]  # fmt: skip
    variables = [
        variable("namespace", f"label_values({RM['requests']}{{{RJ}}}, namespace)"),
        variable("router", f'label_values({RM["requests"]}{{{RJ},namespace=~"$namespace"}}, router)'),
    ]
    return dashboard("llmkube-router", "llmkube / Routers", panels, variables)


def dashboards() -> dict[str, dict[str, Any]]:
    return {
        "llmkube-controller.json": controller_dashboard(),
        "llmkube-services.json": services_dashboard(),
        "llmkube-inference.json": inference_dashboard(),
        "llmkube-router.json": router_dashboard(),
    }


HEADER = "# Generated by hack/gen-monitoring.py: edit the alerts there.\n"


def rendered() -> dict[Path, str]:
    """Every generated file and its content."""
    files = {
        MONITORING / "prometheusrule.yaml": HEADER
        + yaml.safe_dump(prometheus_rule(), sort_keys=False, width=120, allow_unicode=True),
    }
    for name, board in dashboards().items():
        files[MONITORING / "dashboards" / name] = json.dumps(board, indent=2) + "\n"
    return files


def main() -> int:
    for path, text in rendered().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
