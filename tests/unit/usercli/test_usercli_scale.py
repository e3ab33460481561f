"""`llmkube scale` decides what to patch, or refuses with the reason (pure)."""

from typing import Any

import pytest

from llmkube.usercli.errors import UserError
from llmkube.usercli.scale import plan_scale


def isvc(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "s"}, "spec": {"modelRef": "m", **spec}}


def test_a_fixed_count_goes_through_the_scale_subresource() -> None:
    change = plan_scale(isvc(replicas=1), 3, None, None)
    assert (change.subresource, change.patch, change.message) == (
        "scale",
        {"spec": {"replicas": 3}},
        "scaled to 3 replicas",
    )


def test_an_autoscaled_service_refuses_a_hand_set_count_and_says_what_to_do() -> None:
    with pytest.raises(UserError) as refused:
        plan_scale(isvc(replicas=1, autoscaling={"minReplicas": 1, "maxReplicas": 4}), 3, None, None)
    text = str(refused.value)
    assert "HorizontalPodAutoscaler owns the replica count" in text
    assert "between 1 and 4" in text
    assert "llmkube scale s --min N --max M" in text


def test_an_autoscaled_service_can_be_stopped_and_resumed() -> None:
    auto = {"minReplicas": 1, "maxReplicas": 4}
    assert plan_scale(isvc(autoscaling=auto), 0, None, None).patch == {"spec": {"replicas": 0}}
    resumed = plan_scale(isvc(replicas=0, autoscaling=auto), 1, None, None)
    assert resumed.patch == {"spec": {"replicas": 1}}
    assert "takes over" in resumed.message


def test_bounds_patch_autoscaling() -> None:
    change = plan_scale(isvc(autoscaling={"minReplicas": 1, "maxReplicas": 4}), None, 2, 6)
    assert (change.subresource, change.patch) == (
        None,
        {"spec": {"autoscaling": {"minReplicas": 2, "maxReplicas": 6}}},
    )


@pytest.mark.parametrize(
    ("spec", "args", "words"),
    [
        ({}, (None, 2, None), "is not autoscaled"),
        ({"autoscaling": {"maxReplicas": 3}}, (None, 5, None), "--min 5 is more than --max 3"),
        ({}, (2, 1, None), "not both"),
        ({}, (None, None, None), "give a replica count"),
        ({}, (-1, None, None), "cannot be negative"),
    ],
)
def test_mistakes(spec: dict[str, Any], args: tuple[Any, Any, Any], words: str) -> None:
    with pytest.raises(UserError, match=words):
        plan_scale(isvc(**spec), *args)
