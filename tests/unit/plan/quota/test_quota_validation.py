"""An unusable GPUQuota: both or neither of namespaceRef and selector, a negative count."""

from typing import Any

import pytest

from llmkube.plan.quota.validation import quota_issues


@pytest.mark.parametrize(
    ("spec", "issues"),
    [
        ({"namespaceRef": "a", "gpuCount": 8}, []),
        ({"selector": {"matchLabels": {"team": "a"}}, "gpuCount": 0, "vramBytes": 0}, []),
        ({"selector": {}, "gpuCount": 1}, []),
        (
            {"namespaceRef": "a", "selector": {}, "gpuCount": 1},
            [("spec", "exactly one of namespaceRef and selector, not both")],
        ),
        ({"gpuCount": 1}, [("spec", "exactly one of namespaceRef and selector is required")]),
        ({"namespaceRef": "a", "gpuCount": -1}, [("spec.gpuCount", "must not be negative (got -1)")]),
        (
            {"namespaceRef": "a", "gpuCount": 1, "vramBytes": -5},
            [("spec.vramBytes", "must not be negative (got -5)")],
        ),
    ],
)
def test_quota_issues(spec: dict[str, Any], issues: list[tuple[str, str]]) -> None:
    assert quota_issues(spec) == issues
