"""The monitoring kit's generator, loaded as a module (hack/ is not a package)."""

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MONITORING = ROOT / "manifests" / "monitoring"


def generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_monitoring", ROOT / "hack" / "gen-monitoring.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Grafana's variables, replaced by values of the right kind before a query is parsed as PromQL.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
#: Series Prometheus itself adds to every target.
SYNTHETIC = frozenset({"up"})


def dashboard_queries() -> dict[str, list[str]]:
    """Every query of every dashboard panel and variable, by dashboard file."""
    import json

    found: dict[str, list[str]] = {}
    for path in sorted((MONITORING / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        queries = [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]
        for variable in board["templating"]["list"]:
            query = variable.get("query")
            if isinstance(query, dict) and query.get("query", "").startswith("label_values("):
                # label_values(<selector>, label): the selector is PromQL.
                queries.append(query["query"].removeprefix("label_values(").rsplit(",", 1)[0])
        found[path.name] = queries
    return found


def rule_queries() -> list[str]:
    import yaml

    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL query selects (parsed, not pattern-matched)."""
    import promql_parser

    for variable, value in GRAFANA_VARIABLES.items():
        query = query.replace(variable, value)
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {query!r}"
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(query), visit)
    return names


def all_queries() -> list[str]:
    return [query for queries in dashboard_queries().values() for query in queries] + rule_queries()
