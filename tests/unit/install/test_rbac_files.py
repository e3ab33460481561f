"""The controller's roles, read back from the shipped files, grant exactly the permissions listed in
llmkube.controllers.permissions: for the cluster-wide install and for the namespace-scoped one.
(tests/integration/test_rbac_least_privilege.py shows the controller uses each of them, and nothing
else.)"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from llmkube.controllers.permissions import PERMISSIONS, granted, rules
from llmkube.kube.rbac import Scope
from llmkube.plan.inferenceservice.server_key import MASTER_SECRET

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests"
WRITES = {"create", "update", "patch", "delete", "deletecollection", "*"}


def roles(relative: str) -> list[dict[str, Any]]:
    docs = yaml.safe_load_all((MANIFESTS / relative).read_text())
    return [doc for doc in docs if doc and doc["kind"] in ("Role", "ClusterRole")]


#: (group, resource) -> the only names a rule may limit it to (every other rule names none)
NAMED = {("", "configmaps"): ["llmkube-metal-services"], ("", "secrets"): [MASTER_SECRET]}


def grants(*relatives: str) -> set[tuple[str, str, str]]:
    found = set()
    for relative in relatives:
        for role in roles(relative):
            for rule in role["rules"]:
                assert "nonResourceURLs" not in rule
                if "resourceNames" in rule:
                    assert [NAMED[(g, r)] for g in rule["apiGroups"] for r in rule["resources"]] == [
                        rule["resourceNames"]
                    ]
                    assert "create" not in rule["verbs"], "a create names no object"
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            assert "*" not in (group, resource, verb), (
                                f"wildcard in {role['metadata']['name']}"
                            )
                            found.add((verb, group, resource))
    return found


ALWAYS = (
    "rbac/leader_election_role.yaml",
    "rbac/own_namespace_role.yaml",
    "rbac/priorityclass-writer/cluster_role.yaml",
)


@pytest.mark.parametrize(
    "install",
    [
        ("rbac/cluster_role.yaml",),
        ("components/namespace-scoped/role.yaml", "components/namespace-scoped/cluster_role.yaml"),
    ],
    ids=["cluster-wide", "namespace-scoped"],
)
def test_each_install_grants_exactly_the_listed_permissions(install: tuple[str, ...]) -> None:
    assert grants(*install, *ALWAYS) == granted(PERMISSIONS)


def test_the_namespace_scoped_install_writes_nothing_cluster_wide() -> None:
    for role in roles("components/namespace-scoped/cluster_role.yaml"):
        verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
        assert not verbs & WRITES
    (role,) = roles("components/namespace-scoped/role.yaml")
    assert role["kind"] == "Role"
    assert grants("components/namespace-scoped/role.yaml") == granted(rules([Scope.WATCHED]))


def test_the_leader_election_role_is_a_role_in_the_controllers_namespace() -> None:
    (role,) = roles("rbac/leader_election_role.yaml")
    assert (role["kind"], role["metadata"]["namespace"]) == ("Role", "llmkube-system")
    assert grants("rbac/leader_election_role.yaml") == {
        ("get", "coordination.k8s.io", "leases"),
        ("create", "coordination.k8s.io", "leases"),
        ("update", "coordination.k8s.io", "leases"),
    }


def test_the_controller_reads_no_secret_but_the_master_key() -> None:
    """It may create Secrets (metal services' server keys) but read, list, watch, change or delete
    none: a stolen controller token reads no tenant's Secret."""
    for relative in ("rbac/cluster_role.yaml", "components/namespace-scoped/role.yaml", *ALWAYS):
        for role in roles(relative):
            for rule in role["rules"]:
                if "secrets" in rule["resources"]:
                    assert rule["verbs"] == ["create"] or (
                        rule["verbs"] == ["get"] and rule.get("resourceNames") == [MASTER_SECRET]
                    ), (relative, rule)


def test_the_controller_may_touch_only_its_own_configmap_in_its_own_namespace() -> None:
    """The ConfigMap of metal Services: by name for everything but the create (RBAC cannot name what
    a create makes), in a Role of the controller's namespace; no ConfigMap right anywhere else."""
    (role,) = roles("rbac/own_namespace_role.yaml")
    assert (role["kind"], role["metadata"]["namespace"]) == ("Role", "llmkube-system")
    by_names = {tuple(rule.get("resourceNames", ())): rule["verbs"] for rule in role["rules"]}
    assert by_names == {
        ("llmkube-metal-services",): ["get", "list", "watch", "patch"],
        ("llmkube-metal-server-key",): ["get"],  # the master of the servers' keys
        (): ["create"],  # the ConfigMap and the master key, when missing (a create names nothing)
    }
    for elsewhere in ("rbac/cluster_role.yaml", "components/namespace-scoped/role.yaml"):
        assert not {g for g in grants(elsewhere) if g[2] == "configmaps"}, elsewhere


def test_no_core_events_and_no_unused_verbs_of_the_old_role() -> None:
    """What the role used to grant and the controller never used."""
    everything = grants("rbac/cluster_role.yaml", *ALWAYS)
    for unused in [
        ("create", "", "events"),
        ("update", "apps", "deployments"),
        ("update", "", "services"),
        ("update", "autoscaling", "horizontalpodautoscalers"),
        ("get", "inference.llmkube.dev", "inferenceservices/status"),
        ("update", "inference.llmkube.dev", "inferenceservices/status"),
        ("patch", "", "persistentvolumeclaims"),
        ("list", "coordination.k8s.io", "leases"),
        ("watch", "coordination.k8s.io", "leases"),
        ("patch", "coordination.k8s.io", "leases"),
        ("delete", "coordination.k8s.io", "leases"),
        ("update", "scheduling.k8s.io", "priorityclasses"),
        ("get", "scheduling.k8s.io", "priorityclasses"),
    ]:
        assert unused not in everything, unused
