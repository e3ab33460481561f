"""The ServiceMonitor, PodMonitor and PrometheusRule, from kustomize and from the chart, decode
strictly into the Prometheus Operator's API types (hack/tools/monitoring-check.go): no field is
misspelt or mistyped, which a cluster would otherwise ignore without a word."""

import subprocess
from pathlib import Path

from llmkube_testing.cluster import K8S_VERSION
from tools import ROOT, kustomize_overlay, run, tool


def check(path: Path) -> str:
    return run(tool("monitoring-check"), path)


def test_the_monitoring_component_is_valid(tmp_path: Path) -> None:
    built = tmp_path / "component.yaml"
    built.write_text(kustomize_overlay(tmp_path, "monitoring"))
    assert check(built).strip().endswith("4 monitoring objects ok")


def test_the_charts_monitoring_objects_are_valid(tmp_path: Path) -> None:
    rendered = tmp_path / "chart.yaml"
    rendered.write_text(
        run(
            tool("helm"),
            "template",
            "llmkube",
            ROOT / "charts" / "llmkube",
            "--kube-version",
            K8S_VERSION,
            "--set",
            "monitoring.enabled=true",
            env={"HELM_CACHE_HOME": str(tmp_path / "h"), "HELM_CONFIG_HOME": str(tmp_path / "h")},
        )
    )
    assert check(rendered).strip().endswith("4 monitoring objects ok")


def test_a_misspelt_field_is_caught(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.yaml"
    text = (ROOT / "manifests" / "monitoring" / "podmonitor.yaml").read_text()
    wrong.write_text(text.replace("podMetricsEndpoints:", "podMetricEndpoints:"))
    result = subprocess.run(
        [str(tool("monitoring-check")), str(wrong)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert 'unknown field "podMetricEndpoints"' in result.stderr
