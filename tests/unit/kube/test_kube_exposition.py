"""The /metrics answer: the registry's families, then the rendered ones, in one valid text format,
or in OpenMetrics when the scraper asks for it."""

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from llmkube.kube.exposition import (
    TEXT,
    add_renderer,
    escape_label_value,
    exposition,
    family_header,
    negotiate,
)


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("plain", "plain"),
        ('say "hi"', 'say \\"hi\\"'),
        ("back\\slash", "back\\\\slash"),
        ("two\nlines", "two\\nlines"),
        ("", ""),
    ],
)
def test_label_values_are_escaped_as_the_text_format_says(value: str, escaped: str) -> None:
    assert escape_label_value(value) == escaped


def test_rendered_families_follow_the_registrys_and_parse_back() -> None:
    registry = CollectorRegistry()
    Counter("things_total", "Things.", registry=registry).inc(2)
    odd = 'a "quoted"\\name\nwith a newline'

    def render() -> list[str]:
        return [
            family_header("widgets", "Widgets, by name.\nSecond line."),
            f'widgets{{name="{escape_label_value(odd)}"}} 3.0\n',
        ]

    remove = add_renderer(render, registry)
    families = {
        family.name: family for family in text_string_to_metric_families(exposition(registry).decode())
    }
    assert families["things"].samples[0].value == 2.0
    assert families["widgets"].documentation == "Widgets, by name.\nSecond line."
    ((sample),) = families["widgets"].samples
    assert (sample.labels, sample.value) == ({"name": odd}, 3.0)
    remove()
    assert b"widgets" not in exposition(registry)


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        (None, "text/plain; version=0.0.4; charset=utf-8"),
        ("", "text/plain; version=0.0.4; charset=utf-8"),
        ("*/*", "text/plain; version=0.0.4; charset=utf-8"),
        ("text/plain;version=0.0.4;q=0.9,*/*;q=0.1", "text/plain; version=0.0.4; charset=utf-8"),
        ("application/openmetrics-text", "application/openmetrics-text; version=1.0.0; charset=utf-8"),
        # Prometheus' own scrape header when it prefers OpenMetrics.
        (
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
            "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores",
        ),
    ],
)
def test_the_format_is_the_one_the_scraper_asks_for(accept: str | None, content_type: str) -> None:
    assert negotiate(accept).content_type == content_type
    assert negotiate(accept).openmetrics == content_type.startswith("application/openmetrics-text")


def test_openmetrics_has_the_rendered_families_before_its_one_eof() -> None:
    registry = CollectorRegistry()
    Counter("things_total", "Things.", registry=registry).inc(2)

    def render() -> list[str]:
        return [family_header("widgets", "Widgets, by name."), 'widgets{name="a \\"b\\""} 3.0\n']

    remove = add_renderer(render, registry)
    answer = exposition(registry, negotiate("application/openmetrics-text")).decode()
    assert answer.endswith("\n# EOF\n") and answer.count("# EOF") == 1
    families = {family.name: family for family in openmetrics_families(answer)}  # the strict parser
    assert families["things"].type == "counter" and families["things"].samples[0].value == 2.0
    assert families["widgets"].samples[0].labels == {"name": 'a "b"'}
    assert "# EOF" not in exposition(registry, TEXT).decode()
    remove()
