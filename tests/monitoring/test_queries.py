"""Every dashboard and alert query is valid PromQL and uses only names from the kit's metric lists
(the end-to-end suite checks the controller's list against a running controller's /metrics,
tests/unit/router/test_router_metric_names.py the router's against a running router's)."""

from monitoring_support import SYNTHETIC, all_queries, dashboard_queries, generator, metric_names

GEN = generator()
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def known_names() -> set[str]:
    controller = set(GEN.METRICS.values()) | set(GEN.ROUTER_METRICS.values())
    histograms = {name + suffix for name in controller for suffix in HISTOGRAM_SUFFIXES}
    runtimes = {name for names in GEN.RUNTIME_METRICS.values() for name in names}
    return controller | histograms | runtimes | SYNTHETIC


def test_every_query_parses_and_names_only_known_metrics() -> None:
    queries = all_queries()
    assert len(queries) > 40
    unknown = {name: query for query in queries for name in metric_names(query) if name not in known_names()}
    assert not unknown, f"queries use metrics the kit does not know: {unknown}"


def test_every_dashboard_has_queries_and_a_datasource_variable() -> None:
    boards = dashboard_queries()
    assert set(boards) == {
        "llmkube-controller.json",
        "llmkube-services.json",
        "llmkube-inference.json",
        "llmkube-router.json",
    }
    assert all(boards.values())
    for board in GEN.dashboards().values():
        assert board["templating"]["list"][0]["type"] == "datasource"
        panel_ids = [panel["id"] for panel in board["panels"]]
        assert len(panel_ids) == len(set(panel_ids))


def test_every_listed_controller_and_router_metric_is_used() -> None:
    used = {name for query in all_queries() for name in metric_names(query)}
    base = {
        name.removesuffix(suffix) for name in used for suffix in HISTOGRAM_SUFFIXES if name.endswith(suffix)
    }
    unused = (set(GEN.METRICS.values()) | set(GEN.ROUTER_METRICS.values())) - used - base
    assert not unused, f"METRICS or ROUTER_METRICS list names no query uses: {sorted(unused)}"
