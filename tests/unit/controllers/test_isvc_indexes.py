"""The InferenceService cache's secondary indexes."""

from typing import Any

import pytest
from isvc_objects import isvc

from llmkube.controllers.isvc_indexes import (
    NEVER_FIT,
    gpus_never_fit_index,
    priority_class_index,
    service_name_index,
)


@pytest.mark.parametrize(
    ("name", "key"),
    [("llama", "ai/llama"), ("llama.3.1", "ai/llama-3-1")],
)
def test_service_name_index_maps_dotted_names_to_their_service(name: str, key: str) -> None:
    assert tuple(service_name_index(isvc(name))) == (key,)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, ("llmkube-normal",)),
        ({"priority": "batch"}, ("llmkube-batch",)),
        ({"priorityClassName": "team-gold", "priority": "high"}, ("team-gold",)),
    ],
)
def test_priority_class_index(spec: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert tuple(priority_class_index(isvc("a", spec=spec))) == expected


def test_priority_class_index_reads_only_the_two_fields_that_decide_it() -> None:
    # Nothing else of the object is validated (that would cost a whole parse per cache event).
    broken = {"metadata": {"name": "x"}, "spec": {"replicas": "many", "priority": "high"}}
    assert tuple(priority_class_index(broken)) == ("llmkube-high",)
    assert tuple(priority_class_index({"metadata": {"name": "x"}, "spec": {"priority": 3}})) == (
        "llmkube-normal",
    )
    assert tuple(priority_class_index({"metadata": {"name": "x"}})) == ()


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"schedulingStatus": "Unschedulable", "waitingFor": "nvidia.com/gpu: 4"}, (NEVER_FIT,)),
        # Unschedulable for another reason (a node selector): no node change of GPUs helps it.
        ({"schedulingStatus": "Unschedulable", "waitingFor": ""}, ()),
        ({"schedulingStatus": "InsufficientGPU", "waitingFor": "nvidia.com/gpu: 1"}, ()),
        ({}, ()),
        (None, ()),
        ("not a status", ()),
    ],
)
def test_gpus_never_fit_index_reads_the_stored_status(status: Any, expected: tuple[str, ...]) -> None:
    obj = isvc("a")
    if status is not None:
        obj["status"] = status
    assert tuple(gpus_never_fit_index(obj)) == expected
