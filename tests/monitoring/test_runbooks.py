"""Every alert has a runbook_url, and it points at a section of docs/operations.md that exists
(its anchor as GitHub makes it from the heading); the chart's monitoring.runbookBaseURL moves
every one of them to where the page is served."""

import re
from pathlib import Path

import yaml
from llmkube_testing.cluster import K8S_VERSION
from monitoring_support import MONITORING, ROOT, generator
from tools import run, tool

GEN = generator()


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    found = set()
    for line in markdown.splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            text = match.group(1).strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def rules(prometheus_rule: dict[str, object]) -> list[dict[str, object]]:
    spec = prometheus_rule["spec"]
    assert isinstance(spec, dict)
    return [rule for group in spec["groups"] for rule in group["rules"]]


def test_every_alert_links_its_own_section_of_the_operations_page() -> None:
    operations = anchors((ROOT / "docs" / "operations.md").read_text())
    generated = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    alerts = rules(generated)
    assert alerts
    for rule in alerts:
        url = rule["annotations"]["runbook_url"]  # type: ignore[index]
        page, _, anchor = url.partition("#")
        assert page == GEN.RUNBOOK_BASE, rule["alert"]
        assert anchor == str(rule["alert"]).lower()
        assert anchor in operations, f"docs/operations.md has no section for {rule['alert']}"


def test_the_chart_moves_every_runbook_url(tmp_path: Path) -> None:
    base = "https://docs.example.org/llmkube/operations"
    rendered = run(
        tool("helm"),
        "template",
        "llmkube",
        ROOT / "charts" / "llmkube",
        "--kube-version",
        K8S_VERSION,
        "--set",
        "monitoring.enabled=true",
        "--set",
        f"monitoring.runbookBaseURL={base}/",
        env={"HELM_CACHE_HOME": str(tmp_path / "h"), "HELM_CONFIG_HOME": str(tmp_path / "h")},
    )
    rule = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "PrometheusRule")
    urls = [r["annotations"]["runbook_url"] for r in rules(rule)]  # type: ignore[index]
    assert urls == [f"{base}#{str(r['alert']).lower()}" for r in rules(rule)]
