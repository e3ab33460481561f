"""What an admin allows tenants (plan/tenancy.py), and how the planner holds every plan to it."""

from dataclasses import replace
from typing import Any

import pytest
from isvc_factories import live_deployment, make_model, observe
from isvc_planning import condition, plan

from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.policy import host_path_issues
from llmkube.plan.tenancy import (
    LOCAL_SOURCES_LABEL,
    MAX_PRIORITY_LABEL,
    NamespacePolicy,
    TenancyPolicy,
    namespace_policy,
)

LOCAL = "/data/models/tiny.gguf"
ROOTS = ("/data/models",)


def namespace(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "ai", "labels": labels}}


def policy_of(result: Any) -> tuple[str, str, str] | None:
    return condition(result, "Degraded")


def config(**tenancy: Any) -> OperatorConfig:
    return OperatorConfig(tenancy=TenancyPolicy(**tenancy))


def test_namespace_labels_are_read() -> None:
    assert namespace_policy(None) == NamespacePolicy(known=False)
    ns = namespace_policy(
        namespace(
            **{
                "pod-security.kubernetes.io/enforce": "restricted",
                LOCAL_SOURCES_LABEL: "allowed",
                MAX_PRIORITY_LABEL: "normal",
            }
        )
    )
    assert ns == NamespacePolicy(
        known=True, enforce="restricted", local_sources_allowed=True, max_priority="normal"
    )
    # Only the exact value allows local sources.
    assert not namespace_policy(namespace(**{LOCAL_SOURCES_LABEL: "true"})).local_sources_allowed


# --- Pod Security ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "rule"),
    [
        ({"securityContext": {"privileged": True}}, "spec.securityContext.privileged", "privileged"),
        (
            {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
            "spec.securityContext.capabilities.add",
            "non-default capabilities",
        ),
        (
            {"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}},
            "spec.podSecurityContext.seccompProfile.type",
            "seccompProfile",
        ),
        (
            {"podSecurityContext": {"appArmorProfile": {"type": "Unconfined"}}},
            "spec.podSecurityContext.appArmorProfile.type",
            "forbidden AppArmor profile",
        ),
        (
            {"podAnnotations": {"container.apparmor.security.beta.kubernetes.io/llama-server": "unconfined"}},
            "spec.podAnnotations[container.apparmor.security.beta.kubernetes.io/llama-server]",
            "forbidden AppArmor profile",
        ),
        (
            {
                "probeOverrides": {
                    "readiness": {"httpGet": {"host": "169.254.169.254", "path": "/", "port": 80}}
                }
            },
            "spec.probeOverrides.readiness",
            "probe or lifecycle host",
        ),
    ],
)
def test_a_spec_above_the_cluster_maximum_is_a_policy_violation_naming_the_field(
    spec: dict[str, Any], field: str, rule: str
) -> None:
    result = plan(spec)
    assert result.status.phase == "Failed"
    assert result.deployment is None and result.service is None  # nothing applied
    degraded = policy_of(result)
    assert degraded is not None and degraded[:2] == ("True", "PolicyViolation")
    assert degraded[2].startswith(f'{field}: Pod Security "baseline" (the controller\'s --max-pod-security)')
    assert rule in degraded[2]
    assert [e.reason for e in result.events] == ["PolicyViolation"]


def test_runas_root_is_baseline_but_not_restricted() -> None:
    spec = {"podSecurityContext": {"runAsUser": 0}}
    assert plan(spec).status.phase == "Creating"
    result = plan(spec, config=config(max_pod_security="restricted"))
    degraded = policy_of(result)
    assert degraded is not None and degraded[1] == "PolicyViolation"
    assert "spec.podSecurityContext.runAsUser" in degraded[2] and "runAsUser=0" in degraded[2]


def test_a_privileged_maximum_allows_what_the_admin_allows() -> None:
    result = plan({"securityContext": {"privileged": True}}, config=config(max_pod_security="privileged"))
    assert result.status.phase == "Creating" and result.deployment is not None


def test_the_namespace_level_is_enforced_when_stricter_and_named() -> None:
    ns = namespace_policy(namespace(**{"pod-security.kubernetes.io/enforce": "restricted"}))
    # The default pod of a runtime we know meets restricted ...
    assert plan(observed=replace(observe(), namespace=ns)).status.phase == "Creating"
    # ... a user security context that does not is refused before the ReplicaSet fails for ever.
    result = plan({"podSecurityContext": {"fsGroup": 7}}, observed=replace(observe(), namespace=ns))
    degraded = policy_of(result)
    assert degraded is not None and degraded[1] == "PolicyViolation"
    assert "namespace 'ai''s pod-security.kubernetes.io/enforce label" in degraded[2]
    assert "spec.podSecurityContext.runAsNonRoot" in degraded[2]


def test_a_namespace_level_looser_than_the_maximum_loosens_nothing() -> None:
    ns = namespace_policy(namespace(**{"pod-security.kubernetes.io/enforce": "privileged"}))
    result = plan({"securityContext": {"privileged": True}}, observed=replace(observe(), namespace=ns))
    assert result.status.phase == "Failed"


# --- PriorityClasses -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["system-node-critical", "system-cluster-critical", "system-anything"])
def test_system_priority_classes_are_never_allowed(name: str) -> None:
    result = plan(
        {"priorityClassName": name},
        observed=observe(priority_classes={name: 2_000_001_000}),
        config=config(allowed_priority_classes=frozenset({name})),
    )
    degraded = policy_of(result)
    assert degraded is not None and degraded[1] == "PolicyViolation"
    assert degraded[2].startswith(f'spec.priorityClassName: PriorityClass "{name}" is not allowed: system-*')
    assert result.deployment is None


def test_a_custom_class_needs_the_allowlist() -> None:
    observed = observe(priority_classes={"team-gold": 500_000})
    refused = policy_of(plan({"priorityClassName": "team-gold"}, observed=observed))
    assert refused is not None and "--allowed-priority-classes (none)" in refused[2]
    allowed = plan(
        {"priorityClassName": "team-gold"},
        observed=observed,
        config=config(allowed_priority_classes=frozenset({"team-gold"})),
    )
    assert allowed.status.phase == "Creating" and allowed.status.effective_priority == 500_000


@pytest.mark.parametrize(
    ("priority", "ceiling", "allowed"),
    [
        ("critical", "high", False),
        ("high", "high", True),
        ("normal", "high", True),
        ("high", "normal", False),
        ("batch", "batch", True),
        ("low", "batch", False),
    ],
)
def test_the_namespace_ceiling(priority: str, ceiling: str, allowed: bool) -> None:
    ns = namespace_policy(namespace(**{MAX_PRIORITY_LABEL: ceiling}))
    result = plan({"priority": priority}, observed=replace(observe(), namespace=ns))
    assert (result.status.phase == "Creating") is allowed
    if not allowed:
        degraded = policy_of(result)
        assert degraded is not None
        assert degraded[2].startswith(f'spec.priority: "{priority}" (value ')
        assert f"namespace 'ai' allows at most \"{ceiling}\" ({MAX_PRIORITY_LABEL})" in degraded[2]


def test_a_custom_class_is_held_to_the_ceiling_by_its_value() -> None:
    ns = namespace_policy(namespace(**{MAX_PRIORITY_LABEL: "normal"}))
    observed = replace(observe(priority_classes={"team-gold": 500_000}), namespace=ns)
    result = plan(
        {"priorityClassName": "team-gold"},
        observed=observed,
        config=config(allowed_priority_classes=frozenset({"team-gold"})),
    )
    degraded = policy_of(result)
    assert degraded is not None and "(value 500000) is above what is allowed here" in degraded[2]


def test_an_unknown_ceiling_allows_only_batch() -> None:
    ns = namespace_policy(namespace(**{MAX_PRIORITY_LABEL: "nromal"}))
    observed = replace(observe(), namespace=ns)
    degraded = policy_of(plan({"priority": "normal"}, observed=observed))
    assert degraded is not None and "unknown inference.llmkube.dev/max-priority label 'nromal'" in degraded[2]
    assert plan({"priority": "batch"}, observed=observed).status.phase == "Creating"


def test_the_cluster_default_ceiling_applies_without_a_label() -> None:
    result = plan({"priority": "critical"}, config=config(default_max_priority="high"))
    degraded = policy_of(result)
    assert (
        degraded is not None and 'the cluster allows at most "high" (--default-max-priority)' in degraded[2]
    )
    assert plan({"priority": "critical"}).status.phase == "Creating"  # the default: no ceiling


# --- Service types ---------------------------------------------------------------------------------


@pytest.mark.parametrize("service_type", ["NodePort", "LoadBalancer"])
def test_service_types_beyond_cluster_ip_need_the_admin(service_type: str) -> None:
    result = plan({"endpoint": {"type": service_type}})
    degraded = policy_of(result)
    assert degraded is not None and degraded[1] == "PolicyViolation"
    assert degraded[2] == (
        f'spec.endpoint.type: Service type "{service_type}" is not allowed: this cluster allows ClusterIP '
        "(--allowed-service-types)"
    )
    assert result.service is None
    allowed = plan(
        {"endpoint": {"type": service_type}},
        config=config(allowed_service_types=frozenset({"ClusterIP", service_type})),
    )
    assert allowed.service is not None and allowed.service["spec"]["type"] == service_type


# --- host paths ------------------------------------------------------------------------------------


def local_model() -> Any:
    return make_model(LOCAL, status={"path": "/models/k/tiny.gguf"})


def allowed_namespace() -> NamespacePolicy:
    return namespace_policy(namespace(**{LOCAL_SOURCES_LABEL: "allowed"}))


def host_path(result: Any) -> list[str]:
    volumes = result.deployment["spec"]["template"]["spec"]["volumes"] if result.deployment else []
    return [v["hostPath"]["path"] for v in volumes if "hostPath" in v]


def test_a_local_source_inside_the_roots_in_an_allowed_namespace_is_mounted() -> None:
    result = plan(
        model=local_model(),
        observed=replace(observe(), namespace=allowed_namespace()),
        config=config(local_source_roots=ROOTS),
    )
    assert host_path(result) == [LOCAL]
    # The hostPath is judged by its own allowance, not by --max-pod-security (baseline forbids hostPath).
    assert result.status.phase == "Creating"


@pytest.mark.parametrize(
    ("roots", "allowed", "message"),
    [
        ((), True, "local model sources are disabled (--model-local-roots is empty)"),
        (("/srv",), True, "outside the directories local models may come from (--model-local-roots: /srv)"),
        (ROOTS, False, "local model sources are not allowed in namespace 'ai'"),
    ],
)
def test_a_local_source_without_every_allowance_is_never_mounted(
    roots: tuple[str, ...], allowed: bool, message: str
) -> None:
    ns = allowed_namespace() if allowed else namespace_policy(namespace())
    result = plan(
        model=local_model(),
        observed=replace(observe(), namespace=ns),
        config=config(local_source_roots=roots),
    )
    assert result.deployment is None
    degraded = policy_of(result)
    assert degraded is not None and degraded[1] == "PolicyViolation"
    assert (
        degraded[2].startswith(f"model.spec.source: host path '{LOCAL}' is not allowed")
        or message in degraded[2]
    )
    assert message in degraded[2]


@pytest.mark.parametrize(
    "path",
    ["/etc/shadow", "/data/models/../../etc/shadow", "/data/models/./x", "relative/x", "/data/modelsX/y"],
)
def test_the_last_check_refuses_any_host_path_outside_the_roots(path: str) -> None:
    template = {"spec": {"volumes": [{"name": "host-model", "hostPath": {"path": path, "type": "File"}}]}}
    issues = host_path_issues(template, "ai", TenancyPolicy(local_source_roots=ROOTS), allowed_namespace())
    assert len(issues) == 1 and issues[0].field == "model.spec.source"


def test_a_running_deployment_that_mounts_a_forbidden_host_path_is_deleted_while_the_model_waits() -> None:
    """A Deployment made by an earlier version (or before an admin narrowed the roots) keeps
    creating pods that mount the file: it goes, whatever the Model's state."""
    live = live_deployment(ready=1)
    live["spec"]["template"] = {
        "spec": {"volumes": [{"name": "host-model", "hostPath": {"path": "/etc/shadow", "type": "File"}}]}
    }
    result = plan(model=make_model(LOCAL, phase="Failed"), observed=observe(deployment=live))
    assert [ref.kind for ref in result.deletes] == ["Deployment"]
    assert [e.reason for e in result.events] == ["PolicyViolation"]
    assert "deleted: its pods are not allowed any more" in result.events[0].message


def test_a_running_deployment_within_the_rules_is_left_while_the_model_waits() -> None:
    result = plan(model=make_model(phase="Failed"), observed=observe(deployment=live_deployment(ready=1)))
    assert result.deletes == () and result.deployment is None
