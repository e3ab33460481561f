"""The memo of the pod template checks: an answer per content (and arguments), bounded, and the
checks it fronts answer as they did without it."""

from typing import Any

import pytest

from llmkube.plan.apiserver import pod_security, pod_template_rules
from llmkube.plan.apiserver.memo import ContentMemo


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


@pytest.mark.parametrize(
    ("first", "second", "extra", "computed"),
    [
        ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, "", 1),  # the same content, keys in another order
        ({"a": 1}, {"a": 2}, "", 2),  # other content
        ({"a": 1}, {"a": 1}, "other", 2),  # the same content, other arguments
        ({1: "not JSON"}, {1: "not JSON"}, "", 2),  # not JSON: computed each time
    ],
)
def test_an_answer_per_content_and_arguments(
    first: dict[Any, Any], second: dict[Any, Any], extra: str, computed: int
) -> None:
    memo: ContentMemo[int] = ContentMemo(8)
    compute = Counting()
    memo.get(first, "", compute)
    memo.get(second, extra, compute)
    assert compute.calls == computed


def test_the_least_recently_asked_goes_first() -> None:
    memo: ContentMemo[int] = ContentMemo(2)
    compute = Counting()
    for value in ({"a": 1}, {"b": 1}, {"a": 1}, {"c": 1}):  # {"b": 1} is the oldest when {"c": 1} comes
        memo.get(value, "", compute)
    assert len(memo) == 2 and compute.calls == 3
    memo.get({"a": 1}, "", compute)
    assert compute.calls == 3
    memo.get({"b": 1}, "", compute)
    assert compute.calls == 4


TEMPLATES: dict[str, dict[str, Any]] = {
    "valid": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    "bad label": {"metadata": {"labels": {"-x": "y"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    "privileged": {
        "metadata": {},
        "spec": {"containers": [{"name": "c", "image": "i", "securityContext": {"privileged": True}}]},
    },
}


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_the_checks_answer_as_without_the_memo_and_their_answers_are_callers_own(name: str) -> None:
    template = TEMPLATES[name]
    for _ in range(2):  # the second answer comes from the memo
        errors = pod_template_rules.pod_template_errors(template)
        assert errors == pod_template_rules._pod_template_errors(template, pod_template_rules.TEMPLATE)
        errors.append(errors[0] if errors else None)  # type: ignore[arg-type]  # a caller's list to change
        for level in ("baseline", "restricted"):
            found = pod_security.violations(template, level)
            assert found == pod_security._violations(template, level, "spec.template")
            found.clear()
