"""Label and annotation syntax, and the validation errors they give (the API server's agreement
is tested in tests/integration/test_admission_policy.py)."""

import pytest
from isvc_planning import plan

from llmkube.plan.apiserver.labels import label_map_errors, label_value_problem, qualified_name_problem


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("team", None),
        ("example.com/team", None),
        ("a.b_c-d", None),
        ("a" * 63, None),
        ("a" * 64, "the name part is 64 characters (at most 63)"),
        ("team name", "the name part must be letters"),
        ("-team", "the name part must be letters"),
        ("/team", "the prefix before '/' is empty"),
        ("example.com/", "the name part is empty"),
        ("a/b/c", "at most one '/'"),
        ("Example.com/team", "the prefix must be a lowercase DNS subdomain"),
        ("", "the name part is empty"),
    ],
)
def test_qualified_names(key: str, problem: str | None) -> None:
    found = qualified_name_problem(key)
    assert (found is None) == (problem is None)
    if problem:
        assert found is not None and found.startswith(problem)


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), ("ml", True), ("a.b-c_d", True), ("a" * 64, False), ("a b", False), ("a-", False)],
)
def test_label_values(value: str, ok: bool) -> None:
    assert (label_value_problem(value) is None) == ok


def test_annotation_values_are_free_text_but_keys_are_checked() -> None:
    assert label_map_errors("spec.podAnnotations", {"note": "any text: at all"}, check_values=False) == []
    assert label_map_errors("spec.podAnnotations", {"a b": "x"}, check_values=False) == [
        (
            "spec.podAnnotations",
            "key \"a b\": the name part must be letters, digits, '-', '_' or '.', "
            "starting and ending alphanumeric",
        )
    ]


def test_a_bad_pod_label_fails_the_service_naming_field_and_key_and_applies_nothing() -> None:
    result = plan({"podLabels": {"team": "machine learning"}})
    assert result.status.phase == "Failed"
    assert result.deployment is None
    degraded = {c.type: c for c in result.status.conditions or []}["Degraded"]
    assert degraded.reason == "InvalidSpec"
    assert degraded.message.startswith('spec.podLabels: value "machine learning" of "team": must be letters')


@pytest.mark.parametrize("text", ["team\n", "a\nb", "example.com/team\n", "é", "x" * 62 + "é"])
def test_what_the_server_refuses_is_refused_here_too(text: str) -> None:
    """The decision is kube_syntax's (the server's rules, matched whole, lengths in bytes): a trailing
    newline or a multi-byte character is a problem here as it is on the server."""
    assert qualified_name_problem(text) is not None
    assert label_value_problem(text) is not None
