"""Which namespaces a GPUQuota covers: namespaceRef, or a label selector on namespaces."""

from typing import Any

import pytest

from llmkube.plan.quota.scope import covers, selector_matches

LABELS = {"team": "a", "tier": "prod"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({}, True),
        ({"matchLabels": {"team": "a"}}, True),
        ({"matchLabels": {"team": "b"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["prod", "staging"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["prod"]}]}, False),
        ({"matchExpressions": [{"key": "gone", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, False),
        ({"matchExpressions": [{"key": "team", "operator": "Near"}]}, False),
        (
            {
                "matchLabels": {"team": "a"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["dev"]}],
            },
            False,
        ),
    ],
)
def test_selector(selector: dict[str, Any], matches: bool) -> None:
    assert selector_matches(selector, LABELS) is matches


def test_namespace_ref_covers_that_namespace_only() -> None:
    assert covers({"namespaceRef": "team-a"}, "team-a", None)
    assert not covers({"namespaceRef": "team-a"}, "team-b", LABELS)


def test_selector_needs_the_namespace_labels() -> None:
    assert covers({"selector": {"matchLabels": {"team": "a"}}}, "anything", LABELS)
    assert not covers({"selector": {"matchLabels": {"team": "a"}}}, "unknown", None)
    assert not covers({}, "team-a", LABELS)
