"""The compare's fast path (`identical`: byte-equal sorted JSON) may only ever say "no write needed"
where the full normalising compare says so too; and the plan's cheap deep copy is a deep copy."""

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from llmkube.kube.apply.compare import differences, identical, needs_apply, normalise
from llmkube.plan.inferenceservice.objects import fresh_copy

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-5, 5, allow_nan=False),
    st.sampled_from(["", "1", "1Gi"]),
)
keys = st.sampled_from(["a", "b", "limits", "requests", "cpu", "port", "emptyDir", "selector"])
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=3)),
    max_leaves=12,
)


@given(json_values, json_values)
def test_identical_values_never_differ_after_normalising(left: Any, right: Any) -> None:
    if identical(left, right):
        assert differences(normalise(left), normalise(right)) == []


@given(json_values)
def test_a_value_is_identical_to_its_copy_in_any_key_order(value: Any) -> None:
    reordered = _reverse_keys(value)
    assert identical(value, reordered)


def _reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _reverse_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reverse_keys(item) for item in value]
    return value


def test_numbers_of_another_type_are_not_identical() -> None:
    assert not identical({"a": 1}, {"a": 1.0})
    assert not identical({"a": 1}, {"a": True})
    assert not identical({"a": [1, 2]}, {"a": [2, 1]})
    assert not identical({1: "not json"}, {1: "not json"})  # non-string keys: the slow path decides


def test_needs_apply_still_reports_a_difference_and_accepts_an_equivalent_form() -> None:
    fields = {"f:spec": {"f:resources": {"f:limits": {"f:memory": {}}}, "f:port": {}}}
    observed = {
        "metadata": {
            "name": "x",
            "managedFields": [
                {"manager": "me", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields}
            ],
        },
        "spec": {"resources": {"limits": {"memory": "1Gi"}}, "port": 8080},
    }
    same = {"metadata": {"name": "x"}, "spec": {"resources": {"limits": {"memory": "1Gi"}}, "port": 8080}}
    equivalent = {
        "metadata": {"name": "x"},
        "spec": {"resources": {"limits": {"memory": "1024Mi"}}, "port": "8080"},
    }
    changed = {"metadata": {"name": "x"}, "spec": {"resources": {"limits": {"memory": "2Gi"}}, "port": 8080}}
    assert needs_apply(same, observed, "me") == []
    assert needs_apply(equivalent, observed, "me") == []
    assert needs_apply(changed, observed, "me") == [".spec.resources.limits.memory"]


@given(json_values)
def test_fresh_copy_is_a_deep_copy(value: Any) -> None:
    copied = fresh_copy(value)
    assert copied == copy.deepcopy(value)
    assert _mutable_ids(copied).isdisjoint(_mutable_ids(value))


def _mutable_ids(value: Any) -> set[int]:
    if isinstance(value, dict):
        return {id(value)}.union(*(_mutable_ids(item) for item in value.values()))
    if isinstance(value, list):
        return {id(value)}.union(*(_mutable_ids(item) for item in value))
    return set()
