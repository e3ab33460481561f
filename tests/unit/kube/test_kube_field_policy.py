"""Recreate or report: decided from the rejected fields the server names, per kind, never from text."""

from __future__ import annotations

import pytest

from llmkube.kube.apply import NO_POLICY, FieldPolicy
from llmkube.kube.errors import FieldCause, Invalid

DEPLOYMENT = FieldPolicy(recreate_on=frozenset({"spec.selector"}))
PRIORITY_CLASS = FieldPolicy(recreate_on=frozenset({"value", "preemptionPolicy"}))


def invalid(*fields: str, message: str = "field is immutable") -> Invalid:
    causes = tuple(FieldCause(field=f, reason="FieldValueInvalid", message=message) for f in fields)
    return Invalid(422, message, reason="Invalid", causes=causes)


@pytest.mark.parametrize(
    ("policy", "fields", "recreate"),
    [
        (DEPLOYMENT, ("spec.selector",), True),
        (DEPLOYMENT, ("spec.selector.matchLabels",), True),  # below a recreatable field
        (DEPLOYMENT, ("spec.selectorX",), False),  # a prefix of the name is not the field
        # Recreating cannot fix the second cause: the rejection is reported instead.
        (DEPLOYMENT, ("spec.selector", "spec.strategy.rollingUpdate"), False),
        (DEPLOYMENT, ("spec.strategy.rollingUpdate",), False),
        (DEPLOYMENT, (), False),  # no cause named: nothing to decide from
        (PRIORITY_CLASS, ("value",), True),
        (PRIORITY_CLASS, ("preemptionPolicy",), True),
        (PRIORITY_CLASS, ("value", "preemptionPolicy"), True),
        (PRIORITY_CLASS, ("description",), False),
        (NO_POLICY, ("spec.selector",), False),
    ],
)
def test_recreate_only_when_every_rejected_field_is_one_the_kind_recreates_for(
    policy: FieldPolicy, fields: tuple[str, ...], recreate: bool
) -> None:
    assert policy.answers_by_recreate(invalid(*fields)) is recreate


def test_the_message_text_plays_no_part() -> None:
    assert not DEPLOYMENT.answers_by_recreate(invalid("spec.replicas", message="field is immutable"))
    assert DEPLOYMENT.answers_by_recreate(invalid("spec.selector", message="anything at all"))
