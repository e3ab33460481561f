"""A PriorityClass is judged by its values, not by who wrote it (issue: installer vs controller)."""

import copy
from typing import Any

import pytest

from llmkube.plan.inferenceservice.priority import PRIORITY_CLASSES, priority_class_drift, priority_classes


def as_stored(desired: dict[str, Any], manager: str = "kubectl") -> dict[str, Any]:
    """The class as the API server returns it after someone else applied the same values."""
    stored = copy.deepcopy(desired)
    stored["metadata"].update(
        uid="0d1e",
        resourceVersion="42",
        generation=1,
        managedFields=[{"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1"}],
    )
    stored["metadata"]["labels"] = {**stored["metadata"]["labels"], "app.kubernetes.io/part-of": "gitops"}
    return stored


@pytest.mark.parametrize("desired", priority_classes(), ids=[pc.name for pc in PRIORITY_CLASSES])
def test_the_documented_values_written_by_another_manager_are_no_drift(desired: dict[str, Any]) -> None:
    assert priority_class_drift(desired, as_stored(desired)) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"value": 5}, ["value"]),
        ({"preemptionPolicy": "Never"}, ["preemptionPolicy"]),
        ({"description": "edited by hand"}, ["description"]),
        ({"globalDefault": True}, ["globalDefault"]),
        ({"globalDefault": False}, []),  # the API's default: the same as unset
        (
            {"metadata": {"name": "llmkube-normal", "labels": {}}},
            ["metadata.labels.app.kubernetes.io/managed-by"],
        ),
        ({"value": 1, "description": "x"}, ["value", "description"]),
    ],
)
def test_each_changed_value_is_drift(change: dict[str, Any], expected: list[str]) -> None:
    desired = next(pc for pc in priority_classes() if pc["metadata"]["name"] == "llmkube-normal")
    observed = {**as_stored(desired), **change}
    assert priority_class_drift(desired, observed) == expected
