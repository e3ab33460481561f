"""What the shipped manifests promise, read as data (the install tests apply them for real)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests"


def documents(relative: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((MANIFESTS / relative).read_text()) if doc]


def deployment() -> dict[str, Any]:
    (found,) = [d for d in documents("manager/deployment.yaml") if d["kind"] == "Deployment"]
    return found


def controller_container() -> dict[str, Any]:
    (container,) = deployment()["spec"]["template"]["spec"]["containers"]
    return container


def test_the_controller_runs_above_every_inference_class_without_a_critical_one() -> None:
    """Its own class, installed with it: above every llmkube-* class, below the system ones."""
    assert deployment()["spec"]["template"]["spec"]["priorityClassName"] == "llmkube-controller"
    (ours,) = documents("manager/priority_class.yaml")
    assert ours["metadata"]["name"] == "llmkube-controller"
    inference = documents("priorityclasses/priority_classes.yaml")
    assert len(inference) == 5 and all(ours["value"] > c["value"] for c in inference)
    assert ours["value"] < 1_000_000_000 and ours["preemptionPolicy"] == "PreemptLowerPriority"
    # not one of the classes the controller keeps (and the owner component removes)
    assert "app.kubernetes.io/managed-by" not in ours["metadata"]["labels"]
    quota = documents("components/critical-priority/resource_quota.yaml")[0]
    assert quota["spec"]["scopeSelector"]["matchExpressions"] == [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-cluster-critical"]}
    ]
    # room for both replicas and the one surge pod of a rolling update
    assert int(quota["spec"]["hard"]["pods"]) >= deployment()["spec"]["replicas"] + 1


def test_the_model_cache_path_is_a_size_limited_writable_volume() -> None:
    container = controller_container()
    assert "--model-cache-path=/models" in container["args"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in deployment()["spec"]["template"]["spec"]["volumes"]}
    assert volumes[mounts["/models"]]["emptyDir"]["sizeLimit"] == "20Gi"
    assert all("sizeLimit" in v["emptyDir"] for v in volumes.values())


def test_installs_from_manifests_leave_the_priority_classes_to_the_installer() -> None:
    env = {e["name"]: e.get("value") for e in controller_container()["env"]}
    assert env["LLMKUBE_MANAGE_PRIORITY_CLASSES"] == "false"
    assert "priorityclasses" in (MANIFESTS / "kustomization.yaml").read_text()
    (role,) = documents("rbac/cluster_role.yaml")
    verbs = {v for rule in role["rules"] if "priorityclasses" in rule["resources"] for v in rule["verbs"]}
    assert verbs == {"list", "watch"}, "without the writer role the controller cannot write a class"


def test_pdb_and_anti_affinity_select_the_controller_pods() -> None:
    spec = deployment()["spec"]
    labels = spec["template"]["metadata"]["labels"]
    (pdb,) = documents("manager/pod_disruption_budget.yaml")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] < spec["replicas"]
    affinity = spec["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity, (
        "one-node clusters must still run"
    )
    (term,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize(
    ("role", "aggregates_to"),
    [("llmkube-viewer", {"view"}), ("llmkube-editor", {"edit", "admin"})],
)
def test_user_roles_aggregate_into_the_built_in_roles(role: str, aggregates_to: set[str]) -> None:
    (found,) = [d for d in documents("rbac/user_roles.yaml") if d["metadata"]["name"] == role]
    labels = found["metadata"]["labels"]
    prefix = "rbac.authorization.k8s.io/aggregate-to-"
    assert {
        key.removeprefix(prefix) for key, value in labels.items() if key.startswith(prefix)
    } == aggregates_to
    assert all(value == "true" for key, value in labels.items() if key.startswith(prefix))


def test_the_secret_references_policy_checks_each_of_the_first_sixteen_secrets_once() -> None:
    """One authorizer check per expression (each costs 350,000 of an expression's 1,000,000): the
    validations check the distinct Secrets 0..15 one each, in order, and refuse more than 16
    (tests/integration/test_secret_references_policy.py runs them on the API server)."""
    (policy,) = [
        d
        for d in documents("admission/secret_references_policy.yaml")
        if d["kind"] == "ValidatingAdmissionPolicy"
    ]
    assert set(policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"]) == {
        "inferenceservices",
        "models",
        "modelrouters",
    }
    validations = policy["spec"]["validations"]
    limit, *each = validations
    assert "size(variables.secrets) <= 16" in limit["expression"]
    assert len(each) == 16
    for index, validation in enumerate(each):
        text = " ".join(validation["expression"].split())
        assert text.count(".check('get')") == 1, text
        assert f"size(variables.secrets) <= {index} ||" in text
        assert f".name(variables.secrets[{index}])" in text
        assert f"variables.secrets[{index}]" in validation["messageExpression"]
        assert validation["reason"] == "Forbidden"


def test_the_agent_endpointslices_policy_agrees_with_the_agent_and_the_controller() -> None:
    """The policy is hand-written CEL: it must name the identity manifests/agent/rbac.yaml gives the
    agent, the ConfigMap the controller keeps where the install runs the controller, and the very
    labels the agent's slices carry (tests/integration/test_agent_endpointslices_policy.py runs it)."""
    from llmkube.api.constants import LABEL_AGENT_NAME, LABEL_METAL_MANAGED_BY, METAL_AGENT_VALUE
    from llmkube.plan.agent.slices import ENDPOINT_SLICE_MANAGED_BY, MANAGED_BY_VALUE
    from llmkube.plan.inferenceservice.metal_services import METAL_SERVICES_CONFIGMAP

    labels_policy, labels_binding, policy, binding = documents("admission/agent_endpointslices_policy.yaml")
    (account,) = [d for d in documents("agent/rbac.yaml") if d["kind"] == "ServiceAccount"]
    user = f"system:serviceaccount:{account['metadata']['namespace']}:{account['metadata']['name']}"
    for each in (labels_policy, policy):
        (condition,) = each["spec"]["matchConditions"]
        assert condition["expression"] == f'request.userInfo.username in ["{user}"]'
        (rule,) = each["spec"]["matchConstraints"]["resourceRules"]
        assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    assert "paramKind" not in labels_policy["spec"] and "paramRef" not in labels_binding["spec"]
    assert labels_binding["spec"]["policyName"] == labels_policy["metadata"]["name"]
    assert policy["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["paramRef"] == {
        "name": METAL_SERVICES_CONFIGMAP,
        "namespace": deployment()["metadata"]["namespace"],
        "parameterNotFoundAction": "Deny",
    }
    # The parameter is read before matchConditions: the binding that needs it selects the agents'
    # slices only, so no other write of the cluster waits on the ConfigMap.
    assert binding["spec"]["matchResources"]["objectSelector"] == {
        "matchLabels": {LABEL_METAL_MANAGED_BY: METAL_AGENT_VALUE}
    }
    text = " ".join(v["expression"] for v in labels_policy["spec"]["variables"])
    for label, value in (
        (LABEL_METAL_MANAGED_BY, METAL_AGENT_VALUE),
        (ENDPOINT_SLICE_MANAGED_BY, MANAGED_BY_VALUE),
    ):
        assert f"variables.labels['{label}'] == '{value}'" in text, label
    assert f"variables.labels['{LABEL_AGENT_NAME}'] != ''" in text
