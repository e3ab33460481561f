"""Server-side apply with the owned-fields compare, against a real kube-apiserver."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kube_it_helpers import eventually
from llmkube_testing.request_log import RequestLog

from llmkube.kube.apply import FieldPolicy
from llmkube.kube.apply.applier import Applier, ApplyOutcome
from llmkube.kube.cache import Informer
from llmkube.kube.resource import DEPLOYMENTS, PRIORITY_CLASSES, SERVICES
from llmkube.kube.rest import ApiClient

pytestmark = pytest.mark.integration

# Immutable fields the server names in a rejection's causes, answered by delete + recreate.
SELECTOR = FieldPolicy(recreate_on=frozenset({"spec.selector"}))
PRIORITY_CLASS = FieldPolicy(recreate_on=frozenset({"value", "preemptionPolicy"}))


def deployment(
    namespace: str, *, image: str = "llama:1", app: str = "web", cpu: str = "0.5"
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace, "labels": {"app": app, "tier": "serving"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {
                    "containers": [
                        {
                            "name": "server",
                            "image": image,
                            "args": ["--port", "8080"],
                            "ports": [{"name": "http", "containerPort": 8080}],
                            # Written the way a person would: the server stores "500m" and "1Gi".
                            "resources": {"limits": {"cpu": cpu, "memory": "1024Mi"}},
                            "env": [{"name": "MODE", "value": "serve"}],
                        }
                    ],
                    "volumes": [{"name": "cache", "emptyDir": {}}],
                },
            },
        },
    }


@pytest.fixture
async def deployments(client: ApiClient, namespace: str) -> AsyncIterator[Informer]:
    informer = Informer(client, DEPLOYMENTS, namespace=namespace)
    informer.start()
    await asyncio.wait_for(informer.wait_for_sync(), 10)
    yield informer
    await informer.stop()


async def cached_at(informer: Informer, key: str, resource_version: str) -> dict[str, Any]:
    await eventually(
        lambda: (informer.store.get(key) or {}).get("metadata", {}).get("resourceVersion") == resource_version
    )
    obj = informer.store.get(key)
    assert obj is not None
    return obj


async def test_create_then_nothing_to_do(
    client: ApiClient, requests: RequestLog, namespace: str, deployments: Informer
) -> None:
    applier = Applier(client)
    created = await applier.apply(
        DEPLOYMENTS, deployment(namespace), deployments.store.get(f"{namespace}/web")
    )
    assert created.outcome is ApplyOutcome.CREATED
    observed = await cached_at(deployments, f"{namespace}/web", created.object["metadata"]["resourceVersion"])
    before = requests.total_requests()
    for _ in range(5):
        result = await applier.apply(DEPLOYMENTS, deployment(namespace), observed)
        assert result.outcome is ApplyOutcome.UNCHANGED, result.reasons
    assert requests.total_requests() == before  # not even a no-op PATCH


async def test_reapplies_after_someone_edits_a_field_we_own(
    client: ApiClient, namespace: str, deployments: Informer
) -> None:
    applier = Applier(client)
    created = await applier.apply(DEPLOYMENTS, deployment(namespace), None)
    key = f"{namespace}/web"
    await cached_at(deployments, key, created.object["metadata"]["resourceVersion"])
    edit = {"spec": {"template": {"spec": {"containers": [{"name": "server", "image": "hacked:6"}]}}}}
    edited = await client.patch(
        DEPLOYMENTS,
        "web",
        edit,
        namespace,
        patch_type="application/strategic-merge-patch+json",
        field_manager="kubectl-edit",
    )
    observed = await cached_at(deployments, key, edited["metadata"]["resourceVersion"])
    result = await applier.apply(DEPLOYMENTS, deployment(namespace), observed)
    assert result.outcome is ApplyOutcome.UPDATED
    assert result.reasons == [".spec.template.spec.containers[0].image"]
    assert result.object["spec"]["template"]["spec"]["containers"][0]["image"] == "llama:1"
    observed = await cached_at(deployments, key, result.object["metadata"]["resourceVersion"])
    assert (
        await applier.apply(DEPLOYMENTS, deployment(namespace), observed)
    ).outcome is ApplyOutcome.UNCHANGED


async def test_fields_of_other_managers_are_left_alone(
    client: ApiClient, requests: RequestLog, namespace: str, deployments: Informer
) -> None:
    applier = Applier(client)
    created = await applier.apply(DEPLOYMENTS, deployment(namespace), None)
    key = f"{namespace}/web"
    await cached_at(deployments, key, created.object["metadata"]["resourceVersion"])
    theirs = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2030-01-01T00:00:00Z"}},
        "spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}},
    }
    other = await client.patch(DEPLOYMENTS, "web", theirs, namespace, field_manager="kubectl-rollout")
    observed = await cached_at(deployments, key, other["metadata"]["resourceVersion"])
    before = requests.mutating_requests()
    assert (
        await applier.apply(DEPLOYMENTS, deployment(namespace), observed)
    ).outcome is ApplyOutcome.UNCHANGED
    assert requests.mutating_requests() == before
    # A change of ours (a label dropped, the image moved) keeps their annotations.
    desired = deployment(namespace, image="llama:2")
    del desired["metadata"]["labels"]["tier"]
    result = await applier.apply(DEPLOYMENTS, desired, observed)
    assert result.outcome is ApplyOutcome.UPDATED
    meta = result.object["metadata"]
    assert "tier" not in meta["labels"]
    assert meta["annotations"]["kubectl.kubernetes.io/restartedAt"] == "2030-01-01T00:00:00Z"
    template_annotations = result.object["spec"]["template"]["metadata"]["annotations"]
    assert template_annotations == {"kubectl.kubernetes.io/restartedAt": "now"}


async def test_immutable_selector_change_recreates_the_deployment(
    client: ApiClient, requests: RequestLog, namespace: str, deployments: Informer
) -> None:
    applier = Applier(client)
    created = await applier.apply(DEPLOYMENTS, deployment(namespace), None)
    key = f"{namespace}/web"
    observed = await cached_at(deployments, key, created.object["metadata"]["resourceVersion"])
    result = await applier.apply(DEPLOYMENTS, deployment(namespace, app="web-v2"), observed, policy=SELECTOR)
    assert result.outcome is ApplyOutcome.RECREATED
    assert result.object["metadata"]["uid"] != created.object["metadata"]["uid"]
    assert result.object["spec"]["selector"] == {"matchLabels": {"app": "web-v2"}}
    assert [(m, c) for (m, c) in requests.request_counts if m == "DELETE"] == [("DELETE", "200")]
    await eventually(
        lambda: (
            (deployments.store.get(key) or {}).get("metadata", {}).get("uid")
            == result.object["metadata"]["uid"]
        )
    )


async def test_priority_class_value_change_recreates(client: ApiClient, namespace: str) -> None:
    applier = Applier(client)
    name = f"llmkube-test-{namespace}"[:63]

    def priority_class(value: int) -> dict[str, Any]:
        return {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "llmkube"}},
            "value": value,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": "test",
        }

    created = await applier.apply(PRIORITY_CLASSES, priority_class(1000), None)
    assert created.outcome is ApplyOutcome.CREATED
    assert (
        await applier.apply(PRIORITY_CLASSES, priority_class(1000), created.object)
    ).outcome is ApplyOutcome.UNCHANGED
    changed = await applier.apply(
        PRIORITY_CLASSES, priority_class(2000), created.object, policy=PRIORITY_CLASS
    )
    assert changed.outcome is ApplyOutcome.RECREATED
    assert changed.object["value"] == 2000
    never_preempts = priority_class(2000)
    never_preempts["preemptionPolicy"] = "Never"
    assert (
        await applier.apply(PRIORITY_CLASSES, never_preempts, changed.object, policy=PRIORITY_CLASS)
    ).outcome is ApplyOutcome.RECREATED
    await client.delete(PRIORITY_CLASSES, name)


async def test_service_with_named_target_port_and_defaults_is_stable(
    client: ApiClient, namespace: str
) -> None:
    applier = Applier(client)
    desired = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
    }
    created = await applier.apply(SERVICES, copy.deepcopy(desired), None)
    # clusterIP, protocol, sessionAffinity... were defaulted by the server but are not ours.
    assert created.object["spec"]["clusterIP"]
    assert (
        await applier.apply(SERVICES, copy.deepcopy(desired), created.object)
    ).outcome is ApplyOutcome.UNCHANGED
    desired["spec"]["ports"][0]["port"] = 8080
    assert (
        await applier.apply(SERVICES, copy.deepcopy(desired), created.object)
    ).outcome is ApplyOutcome.UPDATED
