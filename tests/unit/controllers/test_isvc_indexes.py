"""The InferenceService cache's secondary indexes."""

from typing import Any

import pytest
from isvc_objects import isvc

from llmkube.controllers.isvc_indexes import priority_class_index, service_name_index


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


def test_priority_class_index_skips_objects_that_do_not_parse() -> None:
    assert tuple(priority_class_index({"metadata": {"name": "x"}, "spec": {"replicas": "many"}})) == ()
