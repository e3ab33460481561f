"""Every metric the monitoring kit's alerts and dashboards query is one the controller really
exports: scraped from the running controller's /metrics, names and types as exposed."""

import aiohttp
from e2e_support import RunningController
from monitoring_support import SYNTHETIC, all_queries, generator, metric_names
from prometheus_client.parser import text_string_to_metric_families

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported_names(text: str) -> set[str]:
    """Sample names the exposition declares, including families with no series yet (a labelled
    histogram before its first observation still has its HELP and TYPE)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


async def test_every_controller_metric_the_kit_queries_is_exported(operator: RunningController) -> None:
    url = operator.manager.http.url("metrics") + "/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        exported = exported_names(await response.text())
    runtime = {name for names in generator().RUNTIME_METRICS.values() for name in names}
    # the routers' names are checked against a running router (tests/unit/router/test_router_metric_names.py)
    routers = {
        name + suffix
        for name in generator().ROUTER_METRICS.values()
        for suffix in ("", "_bucket", "_sum", "_count")
    }
    queried = (
        {name for query in all_queries() for name in metric_names(query)} - runtime - routers - SYNTHETIC
    )
    assert queried, "no controller metric found in the kit's queries"
    missing = sorted(queried - exported)
    assert not missing, f"the kit queries metrics the controller does not export: {missing}"
    # and the list the kit is generated from holds no stale name
    listed = set(generator().METRICS.values())
    assert {name for name in listed if not any(name + s in exported for s in ("", "_bucket"))} == set()
