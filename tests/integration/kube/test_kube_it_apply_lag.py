"""Right after we apply an object, a reconcile whose cache still shows the
version from before that write sends nothing (the same body is on its way to the cache); one that
asks for something else, or sees the object changed by someone since, applies as usual."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from llmkube_testing.request_log import RequestLog

from llmkube.kube.apply.applier import Applier, ApplyOutcome
from llmkube.kube.resource import DEPLOYMENTS
from llmkube.kube.rest import ApiClient

pytestmark = pytest.mark.integration


def deployment(namespace: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "lag", "namespace": namespace, "labels": {"app": "lag"}},
        "spec": {
            "selector": {"matchLabels": {"app": "lag"}},
            "template": {
                "metadata": {"labels": {"app": "lag"}},
                "spec": {"containers": [{"name": "server", "image": image}]},
            },
        },
    }


def writes(requests: RequestLog) -> int:
    return requests.mutating_requests()


async def test_a_stale_cache_copy_does_not_cost_a_second_apply(
    client: ApiClient, requests: RequestLog, namespace: str
) -> None:
    applier = Applier(client)
    v1 = (await applier.apply(DEPLOYMENTS, deployment(namespace, "img:1"), None)).object
    # The plan changes: applied over the copy the cache has (v1).
    updated = await applier.apply(DEPLOYMENTS, deployment(namespace, "img:2"), v1)
    assert updated.outcome is ApplyOutcome.UPDATED
    # The next reconcile comes before the watch delivered our write: the cache still shows v1.
    before = writes(requests)
    for _ in range(3):
        again = await applier.apply(DEPLOYMENTS, deployment(namespace, "img:2"), copy.deepcopy(v1))
        assert again.outcome is ApplyOutcome.UNCHANGED
    assert writes(requests) == before
    # Asking for something else is applied even over the stale copy.
    third = await applier.apply(DEPLOYMENTS, deployment(namespace, "img:3"), copy.deepcopy(v1))
    assert third.outcome is ApplyOutcome.UPDATED and writes(requests) == before + 1
    # ... and then the stale copies (v1, and our own v2) cost nothing for img:3.
    for stale in (v1, updated.object):
        assert (await applier.apply(DEPLOYMENTS, deployment(namespace, "img:3"), stale)).outcome is (
            ApplyOutcome.UNCHANGED
        )
    assert writes(requests) == before + 1
    # The cache catches up (our img:3 arrives): the usual compare, which finds nothing to do.
    assert (await applier.apply(DEPLOYMENTS, deployment(namespace, "img:3"), third.object)).outcome is (
        ApplyOutcome.UNCHANGED
    )
    assert len(applier.recent) == 0
    assert writes(requests) == before + 1


async def test_someone_elses_change_since_our_write_is_undone(
    client: ApiClient, requests: RequestLog, namespace: str
) -> None:
    applier = Applier(client)
    v1 = (await applier.apply(DEPLOYMENTS, deployment(namespace, "img:1"), None)).object
    await applier.apply(DEPLOYMENTS, deployment(namespace, "img:2"), v1)
    # Someone sets the image back (a field we own), and the cache shows their version.
    theirs = await client.patch(
        DEPLOYMENTS,
        "lag",
        {"spec": {"template": {"spec": {"containers": [{"name": "server", "image": "img:1"}]}}}},
        namespace,
        patch_type="application/strategic-merge-patch+json",
        field_manager="someone",
    )
    result = await applier.apply(DEPLOYMENTS, deployment(namespace, "img:2"), theirs)
    assert result.outcome is ApplyOutcome.UPDATED
    assert result.object["spec"]["template"]["spec"]["containers"][0]["image"] == "img:2"


async def test_a_create_is_not_remembered(client: ApiClient, requests: RequestLog, namespace: str) -> None:
    """No copy in the cache may mean ours has not arrived, or someone deleted it: it is applied."""
    applier = Applier(client)
    await applier.apply(DEPLOYMENTS, deployment(namespace, "img:1"), None)
    await client.delete(DEPLOYMENTS, "lag", namespace)
    again = await applier.apply(DEPLOYMENTS, deployment(namespace, "img:1"), None)
    assert again.outcome is ApplyOutcome.CREATED
