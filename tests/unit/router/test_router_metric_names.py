"""Every router metric the monitoring kit's alerts and dashboards query (hack/gen-monitoring.py,
ROUTER_METRICS) is one a running router really serves on /metrics: names and types as exposed, the
families declared before their first series."""

from pathlib import Path

import aiohttp
from monitoring_support import generator, metric_names
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.router.proxy_support import running_proxy

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


async def test_every_router_metric_the_kit_queries_is_served(tmp_path: Path) -> None:
    async with running_proxy("kit", tmp_path) as running:
        running.load(
            {"backends": [{"name": "chat", "inferenceServiceRef": {"name": "chat"}}], "defaultRoute": "chat"}
        )
        async with aiohttp.ClientSession() as session, session.get(running.url + "/metrics") as answer:
            assert answer.status == 200
            page = await answer.text()
    served: set[str] = set()
    for family in text_string_to_metric_families(page):
        served.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    gen = generator()
    listed = set(gen.ROUTER_METRICS.values())
    assert {name for name in listed if not any(name + s in served for s in ("", "_bucket"))} == set()
    router_job = f'job="{gen.ROUTER_JOB}"'
    queried = {
        name
        for group in gen.rule_groups()
        for rule in group["rules"]
        if router_job in rule["expr"]
        for name in metric_names(rule["expr"])
    } | {
        name
        for panel in gen.router_dashboard()["panels"]
        for target in panel["targets"]
        for name in metric_names(target["expr"])
    }
    assert queried, "no router metric in the kit's queries"
    assert sorted(queried - served) == []
