"""A runtimeClassName that names no RuntimeClass: every pod would be refused at
admission with nothing said on the service; it is Failed/InvalidSpec instead."""

from isvc_factories import observe
from isvc_planning import condition, plan


def test_a_missing_runtime_class_fails_the_service_and_names_it() -> None:
    result = plan({"runtimeClassName": "nvidia"}, observed=observe(runtime_classes=frozenset({"kata"})))
    assert result.status.phase == "Failed" and result.deployment is None
    assert condition(result, "Degraded") == (
        "True",
        "InvalidSpec",
        'spec.runtimeClassName: RuntimeClass "nvidia" does not exist',
    )


def test_an_existing_runtime_class_is_used() -> None:
    result = plan({"runtimeClassName": "nvidia"}, observed=observe(runtime_classes=frozenset({"nvidia"})))
    assert result.deployment is not None
    assert result.deployment["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"


def test_unknown_classes_are_not_checked_and_an_invalid_name_is_told_as_such() -> None:
    assert plan({"runtimeClassName": "nvidia"}).deployment is not None  # the controller does not know them
    invalid = plan({"runtimeClassName": "Nvidia"}, observed=observe(runtime_classes=frozenset()))
    degraded = condition(invalid, "Degraded")
    assert degraded is not None and degraded[2].startswith('spec.runtimeClassName: Invalid value: "Nvidia": ')
