"""The Pod Security Standards port (plan/apiserver/pod_security.py), check by check. The integration test
tests/integration/test_pod_security_on_server.py holds the same cases against the API server's own
PodSecurity admission."""

from typing import Any

import pytest
from pod_security_cases import CASES, RESTRICTED_POD, template_with

from llmkube.plan.apiserver.pod_security import LEVELS, meets, parse_level, pod_level, stricter, violations


def test_the_restricted_pod_of_the_cases_meets_every_level() -> None:
    for level in LEVELS:
        assert violations(RESTRICTED_POD, level) == []
    assert pod_level(RESTRICTED_POD) == "restricted"


@pytest.mark.parametrize(("name", "change", "baseline", "restricted"), CASES, ids=[c[0] for c in CASES])
def test_each_check_forbids_what_its_level_forbids(
    name: str, change: dict[str, Any], baseline: set[str], restricted: set[str]
) -> None:
    template = template_with(change)
    assert {v.check for v in violations(template, "baseline")} == baseline
    assert {v.check for v in violations(template, "restricted")} == restricted
    assert violations(template, "privileged") == []
    expected_level = "privileged" if baseline else "baseline" if restricted else "restricted"
    assert pod_level(template) == expected_level


def test_violations_carry_the_paths_of_the_offending_fields() -> None:
    template = template_with({"containers": [{"securityContext": {"privileged": True}}]})
    (found,) = violations(template, "baseline")  # (the API server also wants no escalation flag)
    assert found.paths == ("spec.template.spec.containers[0].securityContext.privileged",)
    assert found.reason == "privileged"
    assert found.detail == 'container "server" must not set securityContext.privileged=true'


def test_a_pod_without_any_security_context_names_every_restricted_rule() -> None:
    bare = {"spec": {"containers": [{"name": "server", "image": "x"}]}}
    assert meets(bare, "baseline")
    checks = {v.check for v in violations(bare, "restricted")}
    assert checks == {
        "allowPrivilegeEscalation",
        "capabilities_restricted",
        "runAsNonRoot",
        "seccompProfile_restricted",
    }
    messages = {v.check: v.detail for v in violations(bare, "restricted")}
    assert messages["runAsNonRoot"] == 'pod or container "server" must set securityContext.runAsNonRoot=true'


def test_a_user_namespace_pod_is_exempt_from_the_non_root_rules_as_upstream() -> None:
    template = template_with({"pod": {"runAsNonRoot": False, "runAsUser": 0}, "hostUsers": False})
    assert violations(template, "restricted") == []
    assert {v.check for v in violations(template_with({"pod": {"runAsUser": 0}}), "restricted")} == {
        "runAsUser"
    }


def test_windows_host_process_is_baseline_forbidden() -> None:
    # (Not among the server cases: the API server wants hostNetwork and every container HostProcess.)
    template = template_with({"pod": {"windowsOptions": {"hostProcess": True}}, "os": {"name": "windows"}})
    (found,) = violations(template, "baseline")
    assert found.check == "windowsHostProcess"
    assert found.detail == "pod must not set securityContext.windowsOptions.hostProcess=true"
    # A Windows pod is exempt from the Linux-only restricted rules (seccomp, capabilities, escalation).
    bare_windows = {"spec": {"os": {"name": "windows"}, "containers": [{"name": "c"}]}}
    assert {v.check for v in violations(bare_windows, "restricted")} == {"runAsNonRoot"}


@pytest.mark.parametrize(
    ("value", "level"),
    [
        ("restricted", "restricted"),
        ("baseline", "baseline"),
        ("privileged", "privileged"),
        ("", None),
        ("x", None),
    ],
)
def test_namespace_label_values(value: str, level: str | None) -> None:
    assert parse_level(value) == level


def test_stricter() -> None:
    assert stricter("baseline", "restricted") == "restricted"
    assert stricter("privileged", "baseline") == "baseline"
    assert stricter("baseline", "baseline") == "baseline"
