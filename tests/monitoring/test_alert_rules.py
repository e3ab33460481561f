"""The PrometheusRule's alerts, checked and unit-tested by promtool: each fires on the series that
should fire it (with its labels and rendered annotations) and stays quiet on healthy ones."""

from pathlib import Path
from typing import Any

import yaml
from monitoring_support import MONITORING, generator
from tools import run, tool

GEN = generator()
M: dict[str, str] = GEN.METRICS
JOB = f'job="{GEN.JOB}"'
LEASE = GEN.LEASE


def series(name: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{JOB}{',' if labels else ''}{labels}}}", "values": values}


def router_series(name: str, labels: str, values: str) -> dict[str, str]:
    """A router pod's series, as the PodMonitor llmkube-router labels them."""
    return {
        "series": f'{name}{{job="{GEN.ROUTER_JOB}",namespace="team-a",router="gateway",{labels}}}',
        "values": values,
    }


def annotations(alertname: str, **labels: str) -> dict[str, str]:
    """The alert's annotations with `{{ $labels.x }}` filled in (the rule's own text, so a reworded
    description needs no test change; `$value` is checked where a case gives it)."""
    for group in GEN.rule_groups():
        for rule in group["rules"]:
            if rule["alert"] == alertname:
                rendered = {}
                for key, text in rule["annotations"].items():
                    for label, value in labels.items():
                        text = text.replace(f"{{{{ $labels.{label} }}}}", value)
                    rendered[key] = text
                return rendered
    raise KeyError(alertname)


def firing(
    alertname: str, severity: str, value_text: dict[str, str] | None = None, **labels: str
) -> dict[str, Any]:
    expected = annotations(alertname, **labels)
    for key, text in (value_text or {}).items():
        expected[key] = text
    return {"exp_labels": {"severity": severity, **labels}, "exp_annotations": expected}


def case(inputs: list[dict[str, str]], checks: list[tuple[str, str, list[dict[str, Any]]]]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": inputs,
        "alert_rule_test": [
            {"eval_time": at, "alertname": name, "exp_alerts": alerts} for at, name, alerts in checks
        ],
    }


def phase(kind: str, name: str, value_phase: str, values: str) -> dict[str, str]:
    label = "inferenceservice" if kind == "isvc" else "model"
    metric = M["isvc_phase"] if kind == "isvc" else M["model_status"]
    return series(metric, f'{label}="{name}",namespace="team-a",phase="{value_phase}"', values)


CASES = [
    # Controller down: up turns 0 at minute 11; pending 5 minutes, then firing. Also with no series at all.
    case(
        [series("up", 'instance="a"', "1x10 0x30")],
        [
            ("10m", "LLMKubeControllerDown", []),
            ("14m", "LLMKubeControllerDown", []),
            ("20m", "LLMKubeControllerDown", [firing("LLMKubeControllerDown", "critical")]),
        ],
    ),
    case([], [("10m", "LLMKubeControllerDown", [firing("LLMKubeControllerDown", "critical")])]),
    # A second replica up keeps it quiet.
    case(
        [series("up", 'instance="a"', "0x30"), series("up", 'instance="b"', "1x30")],
        [("20m", "LLMKubeControllerDown", [])],
    ),
    # Nobody leads while both replicas are up; quiet once one does.
    case(
        [
            series("up", 'instance="a"', "1x40"),
            series("up", 'instance="b"', "1x40"),
            series(M["leader"], f'instance="a",name="{LEASE}"', "0x20 1x20"),
            series(M["leader"], f'instance="b",name="{LEASE}"', "0x40"),
        ],
        [
            ("3m", "LLMKubeNoLeader", []),
            ("10m", "LLMKubeNoLeader", [firing("LLMKubeNoLeader", "critical")]),
            ("30m", "LLMKubeNoLeader", []),
        ],
    ),
    # Half of the InferenceService reconciles fail; the Model controller's never do.
    case(
        [
            series(M["reconcile_total"], 'controller="inferenceservice",result="success"', "0+5x40"),
            series(M["reconcile_total"], 'controller="inferenceservice",result="error"', "0+5x40"),
            series(M["reconcile_errors"], 'controller="inferenceservice"', "0+5x40"),
            series(M["reconcile_total"], 'controller="model",result="success"', "0+5x40"),
            series(M["reconcile_errors"], 'controller="model"', "0x40"),
        ],
        [
            ("10m", "LLMKubeReconcileErrors", []),
            (
                "30m",
                "LLMKubeReconcileErrors",
                [
                    firing(
                        "LLMKubeReconcileErrors",
                        "warning",
                        {
                            "description": "More than 10% of the inferenceservice controller's reconciles "
                            "returned an error over 15 minutes (50%). The controller logs name the objects."
                        },
                        controller="inferenceservice",
                    )
                ],
            ),
        ],
    ),
    # 150 services queued for 20 minutes; a short burst does not fire.
    case(
        [
            series(
                M["queue_depth"],
                'name="inferenceservice",controller="inferenceservice",priority=""',
                "150x30",
            ),
            series(M["queue_depth"], 'name="model",controller="model",priority=""', "0 500 0x28"),
        ],
        [
            ("10m", "LLMKubeWorkqueueDepthHigh", []),
            (
                "20m",
                "LLMKubeWorkqueueDepthHigh",
                [
                    firing(
                        "LLMKubeWorkqueueDepthHigh",
                        "warning",
                        {
                            "description": "150 objects have waited in the inferenceservice work queue "
                            "for 15 minutes: the controller does not keep up (too few --workers, or a slow "
                            "API server)."
                        },
                        name="inferenceservice",
                    )
                ],
            ),
        ],
    ),
    # Every item waits between 60 and 120 s (p99 ~ 119 s); the Model queue is fast.
    case(
        [
            series(M["queue_latency"] + "_bucket", 'name="inferenceservice",le="60"', "0x40"),
            series(M["queue_latency"] + "_bucket", 'name="inferenceservice",le="120"', "0+10x40"),
            series(M["queue_latency"] + "_bucket", 'name="inferenceservice",le="+Inf"', "0+10x40"),
            series(M["queue_latency"] + "_bucket", 'name="model",le="1"', "0+10x40"),
            series(M["queue_latency"] + "_bucket", 'name="model",le="+Inf"', "0+10x40"),
        ],
        [
            (
                "30m",
                "LLMKubeWorkqueueLatencyHigh",
                [
                    firing(
                        "LLMKubeWorkqueueLatencyHigh",
                        "warning",
                        {
                            "description": "The 99th percentile of the time an object waits in the "
                            "inferenceservice queue has been above 60 s for 15 minutes (1m 59s)."
                        },
                        name="inferenceservice",
                    )
                ],
            )
        ],
    ),
    # One reconcile has been running since minute 0 (the gauge grows a minute per minute).
    case(
        [
            series(M["queue_longest"], 'name="model",controller="model"', "0+60x30"),
            series(M["queue_longest"], 'name="inferenceservice",controller="inferenceservice"', "0x30"),
        ],
        [
            ("12m", "LLMKubeReconcileStuck", []),
            (
                "20m",
                "LLMKubeReconcileStuck",
                [
                    firing(
                        "LLMKubeReconcileStuck",
                        "warning",
                        {
                            "description": "A worker of the model controller has been busy with one object "
                            "for 20m 0s: it is stuck (a hung API call or model copy)."
                        },
                        name="model",
                    )
                ],
            ),
        ],
    ),
    # Services by phase: one Failed, one waiting for GPUs, one Creating, one Ready; a Failed Model.
    case(
        [
            phase("isvc", "broken", "Failed", "1x60"),
            phase("isvc", "broken", "Ready", "0x60"),
            phase("isvc", "queued", "WaitingForGPU", "1x60"),
            phase("isvc", "slow", "Creating", "1x60"),
            phase("isvc", "fine", "Ready", "1x60"),
            phase("isvc", "fine", "Failed", "0x60"),
            phase("model", "gone", "Failed", "1x60"),
            phase("model", "ok", "Ready", "1x60"),
        ],
        [
            ("3m", "LLMKubeInferenceServiceFailed", []),
            (
                "10m",
                "LLMKubeInferenceServiceFailed",
                [
                    firing(
                        "LLMKubeInferenceServiceFailed",
                        "warning",
                        namespace="team-a",
                        inferenceservice="broken",
                    )
                ],
            ),
            ("20m", "LLMKubeInferenceServiceWaitingForGPU", []),
            (
                "40m",
                "LLMKubeInferenceServiceWaitingForGPU",
                [
                    firing(
                        "LLMKubeInferenceServiceWaitingForGPU",
                        "warning",
                        namespace="team-a",
                        inferenceservice="queued",
                    )
                ],
            ),
            ("20m", "LLMKubeInferenceServiceNotReady", []),
            (
                "40m",
                "LLMKubeInferenceServiceNotReady",
                [
                    firing(
                        "LLMKubeInferenceServiceNotReady",
                        "warning",
                        namespace="team-a",
                        inferenceservice="slow",
                    )
                ],
            ),
            (
                "10m",
                "LLMKubeModelFailed",
                [firing("LLMKubeModelFailed", "warning", namespace="team-a", model="gone")],
            ),
        ],
    ),
]


RM: dict[str, str] = GEN.ROUTER_METRICS
REQUESTS = RM["requests"]
REFUSED = RM["refused"]


def inference_up(pod: str, values: str) -> dict[str, str]:
    labels = f'job="{GEN.INFERENCE_JOB}",namespace="team-a",inferenceservice="chat",pod="{pod}"'
    return {"series": f"up{{{labels}}}", "values": values}


CASES += [
    # An inference pod that runs but has not answered a scrape since minute 5; its sibling serves.
    case(
        [
            inference_up("chat-1", "1x5 0x40"),
            inference_up("chat-2", "1x45"),
        ],
        [
            ("15m", "LLMKubeInferencePodNotServing", []),
            (
                "30m",
                "LLMKubeInferencePodNotServing",
                [
                    firing(
                        "LLMKubeInferencePodNotServing",
                        "warning",
                        namespace="team-a",
                        inferenceservice="chat",
                        pod="chat-1",
                    )
                ],
            ),
        ],
    ),
    # A router answering 10% 5xx (6 of 60 a minute) for 20 minutes; a second router at 1% stays quiet.
    case(
        [
            router_series(REQUESTS, 'rule="default",backend="chat",code="200"', "0+54x30"),
            router_series(REQUESTS, 'rule="default",backend="chat",code="502"', "0+6x30"),
            {
                "series": f'{REQUESTS}{{job="{GEN.ROUTER_JOB}",namespace="team-a",router="calm",code="200"}}',
                "values": "0+99x30",
            },
            {
                "series": f'{REQUESTS}{{job="{GEN.ROUTER_JOB}",namespace="team-a",router="calm",code="503"}}',
                "values": "0+1x30",
            },
        ],
        [
            ("8m", "LLMKubeRouterErrors", []),
            (
                "20m",
                "LLMKubeRouterErrors",
                [
                    firing(
                        "LLMKubeRouterErrors",
                        "warning",
                        {
                            "description": "More than 5% of the answers of ModelRouter team-a/gateway "
                            "have been 5xx for 10 minutes (10%): backends failing (502, 504) or none able to "
                            "serve (503). llmkube_router_upstream_failures_total and the refusals by reason "
                            "say which."
                        },
                        namespace="team-a",
                        router="gateway",
                    )
                ],
            ),
        ],
    ),
    # Fail-closed answers from minute 10 on; budget refusals only in a burst that ends.
    case(
        [
            router_series(REFUSED, 'reason="fail_closed"', "0x10 0+3x30"),
            router_series(REFUSED, 'reason="budget"', "0x10 0+5x2 10x30"),
        ],
        [
            ("8m", "LLMKubeRouterFailClosed", []),
            (
                "25m",
                "LLMKubeRouterFailClosed",
                [firing("LLMKubeRouterFailClosed", "warning", namespace="team-a", router="gateway")],
            ),
            ("12m", "LLMKubeRouterBudgetExhausted", []),
            ("30m", "LLMKubeRouterBudgetExhausted", []),
        ],
    ),
    # Budget refusals for 20 minutes.
    case(
        [router_series(REFUSED, 'reason="budget"', "0+2x30")],
        [
            (
                "20m",
                "LLMKubeRouterBudgetExhausted",
                [firing("LLMKubeRouterBudgetExhausted", "warning", namespace="team-a", router="gateway")],
            )
        ],
    ),
    # Backend "cloud" quarantined on both router replicas; "chat" out of service on one replica only.
    case(
        [
            router_series(RM["healthy"], 'pod="gateway-a",backend="cloud"', "1x5 0x30"),
            router_series(RM["healthy"], 'pod="gateway-b",backend="cloud"', "1x5 0x30"),
            router_series(RM["healthy"], 'pod="gateway-a",backend="chat"', "0x35"),
            router_series(RM["healthy"], 'pod="gateway-b",backend="chat"', "1x35"),
        ],
        [
            ("8m", "LLMKubeRouterBackendUnavailable", []),
            (
                "20m",
                "LLMKubeRouterBackendUnavailable",
                [
                    firing(
                        "LLMKubeRouterBackendUnavailable",
                        "warning",
                        namespace="team-a",
                        router="gateway",
                        backend="cloud",
                    )
                ],
            ),
        ],
    ),
]


def rules_file(directory: Path) -> Path:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


def test_the_rules_pass_promtool_check(tmp_path: Path) -> None:
    output = run(tool("promtool"), "check", "rules", rules_file(tmp_path))
    assert "SUCCESS: 15 rules found" in output


def test_every_alert_fires_when_it_should_and_only_then(tmp_path: Path) -> None:
    rules_file(tmp_path)
    tested = {check["alertname"] for test in CASES for check in test["alert_rule_test"]}
    defined = {rule["alert"] for group in GEN.rule_groups() for rule in group["rules"]}
    assert tested == defined, f"alerts without a test: {sorted(defined - tested)}"
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump(
            {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": CASES}, sort_keys=False
        )
    )
    output = run(tool("promtool"), "test", "rules", "tests.yaml", cwd=tmp_path)
    assert "SUCCESS" in output
