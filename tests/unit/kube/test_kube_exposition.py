"""The /metrics answer: the registry's families, then the rendered ones, in one valid text format."""

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from llmkube.kube.exposition import add_renderer, escape_label_value, exposition, family_header


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
