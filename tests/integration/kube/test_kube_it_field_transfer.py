"""Field ownership beyond a plain apply, against a real kube-apiserver: an exclusive subtree
(a strategy switch over a defaulted block nobody owns), a hand-over (a field we stop setting keeps
its value), adoption of a predecessor's Update entries, and recreate-or-report by cause field.
Each case first shows what the server does without the policy: the defect it prevents."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from llmkube_testing.request_log import RequestLog

from llmkube.kube.apply import FieldPolicy
from llmkube.kube.apply.applier import Applier, ApplyOutcome
from llmkube.kube.errors import Invalid
from llmkube.kube.resource import DEPLOYMENTS, SERVICES
from llmkube.kube.rest import ApiClient

pytestmark = pytest.mark.integration

ME = "llmkube-controller"
STRATEGY = FieldPolicy(exclusive=(("spec", "strategy"),))
REPLICAS = FieldPolicy(hand_over=(("spec", "replicas"),))
ADOPT = FieldPolicy(adopt_from=frozenset({"manager"}))
SELECTOR = FieldPolicy(recreate_on=frozenset({"spec.selector"}))
ROLLING = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


def deployment(namespace: str, *, app: str = "web", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace, "labels": {"app": app}},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "server", "image": "llama:1"}]},
            },
            **spec,
        },
    }


def managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields") or []}


async def test_a_strategy_switch_over_a_default_nobody_owns(
    client: ApiClient, requests: RequestLog, namespace: str
) -> None:
    applier = Applier(client)
    old = await applier.apply(DEPLOYMENTS, deployment(namespace), None)  # the previous intent: no strategy
    assert old.object["spec"]["strategy"] == ROLLING  # defaulted, owned by nobody
    gpu = deployment(namespace, strategy={"type": "Recreate"})
    # The defect: applying Recreate keeps the unowned rollingUpdate, and the server refuses.
    with pytest.raises(Invalid) as refused:
        await applier.apply(DEPLOYMENTS, copy.deepcopy(gpu), old.object)
    assert [cause.field for cause in refused.value.causes] == ["spec.strategy.rollingUpdate"]
    # With the subtree ours alone: one managedFields patch, then one apply.
    before = requests.mutating_requests()
    switched = await applier.apply(DEPLOYMENTS, copy.deepcopy(gpu), old.object, policy=STRATEGY)
    assert switched.outcome is ApplyOutcome.UPDATED
    assert switched.object["spec"]["strategy"] == {"type": "Recreate"}
    assert switched.object["metadata"]["uid"] == old.object["metadata"]["uid"]
    assert requests.mutating_requests() - before == 2
    assert managers(switched.object) == {(ME, "Apply")}  # the managedFields patch left no entry of its own
    again = await applier.apply(DEPLOYMENTS, copy.deepcopy(gpu), switched.object, policy=STRATEGY)
    assert again.outcome is ApplyOutcome.UNCHANGED
    # And back, with the default spelled out (so it is ours): one apply, and then nothing.
    cpu = deployment(namespace, strategy=ROLLING)
    back = await applier.apply(DEPLOYMENTS, copy.deepcopy(cpu), switched.object, policy=STRATEGY)
    assert back.object["spec"]["strategy"] == ROLLING
    assert (
        await applier.apply(DEPLOYMENTS, copy.deepcopy(cpu), back.object, policy=STRATEGY)
    ).outcome is ApplyOutcome.UNCHANGED
    forth = await applier.apply(DEPLOYMENTS, copy.deepcopy(gpu), back.object, policy=STRATEGY)
    assert forth.object["spec"]["strategy"] == {"type": "Recreate"}
    assert forth.reasons and "<took over managed fields>" not in forth.reasons  # ours already: no patch


async def test_a_field_we_stop_setting_is_handed_over_not_reset(client: ApiClient, namespace: str) -> None:
    applier = Applier(client)
    three = await applier.apply(DEPLOYMENTS, deployment(namespace, replicas=3), None)
    # The defect: dropping a field we alone own resets it to its default.
    reset = await applier.apply(DEPLOYMENTS, deployment(namespace), three.object)
    assert reset.object["spec"]["replicas"] == 1
    three = await applier.apply(DEPLOYMENTS, deployment(namespace, replicas=3), reset.object)
    kept = await applier.apply(DEPLOYMENTS, deployment(namespace), three.object, policy=REPLICAS)
    assert kept.object["spec"]["replicas"] == 3
    assert ("llmkube-controller-handover", "Apply") in managers(kept.object)
    assert "<handed over .spec.replicas>" in kept.reasons
    assert (
        await applier.apply(DEPLOYMENTS, deployment(namespace), kept.object, policy=REPLICAS)
    ).outcome is ApplyOutcome.UNCHANGED
    # The new owner (an HPA scaling through the scale subresource) takes it with its own value.
    await client.patch(
        DEPLOYMENTS, "web", {"spec": {"replicas": 5}}, namespace, subresource="scale", field_manager="hpa"
    )
    scaled = await client.get(DEPLOYMENTS, "web", namespace)
    assert ("llmkube-controller-handover", "Apply") not in managers(scaled)  # it owned nothing more
    assert (
        await applier.apply(DEPLOYMENTS, deployment(namespace), scaled, policy=REPLICAS)
    ).outcome is ApplyOutcome.UNCHANGED
    # A stale copy (we still seem to own the count, the new owner has moved it): no reset either.
    stale = copy.deepcopy(three.object)
    handed = await applier.apply(DEPLOYMENTS, deployment(namespace), stale, policy=REPLICAS)
    assert handed.object["spec"]["replicas"] == 5


async def test_the_update_entries_of_a_predecessor_are_adopted(client: ApiClient, namespace: str) -> None:
    applier = Applier(client)
    theirs = deployment(namespace, replicas=2, revisionHistoryLimit=3)
    theirs["spec"]["template"]["metadata"]["annotations"] = {"old": "yes"}
    path = DEPLOYMENTS.collection_path(namespace)
    created = await client.request("POST", path, params={"fieldManager": "manager"}, body=theirs)
    assert managers(created) == {("manager", "Update")}
    ours = deployment(namespace, replicas=2)
    # The defect: a forced apply takes over what it sets, and the predecessor's extra fields stay.
    kept = await applier.apply(DEPLOYMENTS, copy.deepcopy(ours), created)
    assert kept.object["spec"]["revisionHistoryLimit"] == 3
    assert kept.object["spec"]["template"]["metadata"]["annotations"] == {"old": "yes"}
    adopted = await applier.apply(DEPLOYMENTS, copy.deepcopy(ours), kept.object, policy=ADOPT)
    assert adopted.object["spec"]["revisionHistoryLimit"] == 10  # the server's default again
    assert "annotations" not in adopted.object["spec"]["template"]["metadata"]
    assert adopted.object["spec"]["replicas"] == 2
    assert managers(adopted.object) == {(ME, "Apply")}
    assert adopted.object["metadata"]["uid"] == created["metadata"]["uid"]
    assert (
        await applier.apply(DEPLOYMENTS, copy.deepcopy(ours), adopted.object, policy=ADOPT)
    ).outcome is ApplyOutcome.UNCHANGED


async def test_a_service_of_a_predecessor_keeps_its_cluster_ip(client: ApiClient, namespace: str) -> None:
    applier = Applier(client)
    theirs = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": namespace, "labels": {"app": "web", "old": "x"}},
        "spec": {
            "selector": {"app": "web"},
            "sessionAffinity": "ClientIP",
            "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}],
        },
    }
    created = await client.request(
        "POST", SERVICES.collection_path(namespace), params={"fieldManager": "manager"}, body=theirs
    )
    ours = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": namespace, "labels": {"app": "web"}},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 9090, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    adopted = await applier.apply(SERVICES, copy.deepcopy(ours), created, policy=ADOPT)
    spec = adopted.object["spec"]
    assert spec["clusterIP"] == created["spec"]["clusterIP"]
    assert spec["sessionAffinity"] == "None"
    assert spec["ports"] == ours["spec"]["ports"]  # their 8080 port went with their ownership
    assert adopted.object["metadata"]["labels"] == {"app": "web"}
    assert (
        await applier.apply(SERVICES, copy.deepcopy(ours), adopted.object, policy=ADOPT)
    ).outcome is ApplyOutcome.UNCHANGED


async def test_recreate_only_for_the_fields_of_the_policy(
    client: ApiClient, requests: RequestLog, namespace: str
) -> None:
    applier = Applier(client)
    created = await applier.apply(DEPLOYMENTS, deployment(namespace), None)
    moved = deployment(namespace, app="web-v2")
    # Without the policy the immutable selector is a rejection like any other.
    with pytest.raises(Invalid) as refused:
        await applier.apply(DEPLOYMENTS, copy.deepcopy(moved), created.object)
    assert [cause.field for cause in refused.value.causes] == ["spec.selector"]
    recreated = await applier.apply(DEPLOYMENTS, copy.deepcopy(moved), created.object, policy=SELECTOR)
    assert recreated.outcome is ApplyOutcome.RECREATED
    assert recreated.object["metadata"]["uid"] != created.object["metadata"]["uid"]
    # A rejection of anything else is reported, and nothing is deleted.
    broken = deployment(
        namespace, app="web-v2", strategy={"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}
    )
    deletes = requests.request_counts.get(("DELETE", "200"), 0)
    with pytest.raises(Invalid) as rejected:
        await applier.apply(DEPLOYMENTS, broken, recreated.object, policy=SELECTOR)
    assert [cause.field for cause in rejected.value.causes] == ["spec.strategy.rollingUpdate"]
    assert requests.request_counts.get(("DELETE", "200"), 0) == deletes
