"""Turning autoscaling on hands `spec.replicas` of the Deployment over to the HPA without a dip.

Our apply stops setting `spec.replicas` once an HPA owns the count. Had we been its only owner, the
server would reset it to the default (1) the moment we dropped it: the server-side apply "transferring
ownership" trap. Every test here watches the Deployment and checks the lowest `spec.replicas` it
ever had. Semantics (docs/controller.md, "Replicas and autoscaling"): a Deployment created for an autoscaled
service starts at `spec.replicas` clamped to [minReplicas, maxReplicas] (what the HPA would pick
first), never at 1; turning autoscaling off brings the count back to `spec.replicas`."""

from collections.abc import AsyncIterator
from typing import Any

import pytest
from e2e_support import (
    API,
    RunningController,
    StatusWatch,
    condition_triple,
    eventually,
    eventually_equal,
    hf_model,
    isvc,
    patch,
    patch_isvc,
    phase_is,
    reconcile_now,
    services_deleted_first,  # noqa: F401  (a fixture)
    status_of,
    writes_quiesce,
)

from llmkube.kube.types import ObjectKey

pytestmark = pytest.mark.usefixtures("services_deleted_first")

HPA = ("autoscaling/v2", "HorizontalPodAutoscaler")


def replicas_seen(watch: StatusWatch) -> list[int]:
    """`spec.replicas` of every version of the Deployment the watch saw, in order."""
    return [int(obj["spec"].get("replicas", 1)) for obj in list(watch.objects)]


def ready_at(admin: Any, name: str, namespace: str, count: int) -> Any:
    def check() -> bool:
        status = status_of(admin, "InferenceService", name, namespace)
        return status.get("phase") == "Ready" and status.get("readyReplicas") == count

    return check


@pytest.fixture
async def deployment_watch(operator: RunningController, full_namespace: str) -> AsyncIterator[StatusWatch]:
    watch = StatusWatch(
        operator.cluster.admin(), "Deployment", "svc", full_namespace, api_version="apps/v1"
    ).start()
    yield watch
    watch.stop()


async def test_turning_autoscaling_on_and_off_never_drops_the_running_replicas(
    operator: RunningController, full_namespace: str, deployment_watch: StatusWatch
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("svc", modelRef="m", skipModelInit=True, replicas=3), namespace=ns)
    await eventually(ready_at(admin, "svc", ns, 3), what="svc Ready with 3 replicas")

    patch_isvc(admin, "svc", ns, {"autoscaling": {"minReplicas": 1, "maxReplicas": 5}})
    await eventually(lambda: admin.get_or_none(*HPA, "svc", ns), what="the HPA")
    await writes_quiesce(operator)
    seen = replicas_seen(deployment_watch)
    print(f"autoscaling on: lowest spec.replicas seen = {min(seen)} (of {seen})")
    assert min(seen) == 3, seen
    await eventually(ready_at(admin, "svc", ns, 3), what="svc still Ready with 3")

    # The HPA scales (its own manager, the scale subresource); then autoscaling goes off again:
    # the count is spec.replicas again, ours.
    patch(
        admin,
        "apps/v1",
        "Deployment",
        "svc",
        ns,
        {"spec": {"replicas": 4}},
        subresource="scale",
        field_manager="horizontal-pod-autoscaler",
    )
    await eventually(ready_at(admin, "svc", ns, 4), what="svc Ready with the HPA's 4")
    patch_isvc(admin, "svc", ns, {"autoscaling": None})
    await eventually(lambda: admin.get_or_none(*HPA, "svc", ns) is None, what="our HPA deleted")
    await eventually_equal(
        lambda: admin.get("apps/v1", "Deployment", "svc", ns)["spec"]["replicas"], 3, what="back to 3"
    )
    await eventually(ready_at(admin, "svc", ns, 3), what="svc Ready with 3 again")
    assert min(replicas_seen(deployment_watch)) == 3

    # And on again: the count is ours alone once more, and is handed over again.
    patch_isvc(admin, "svc", ns, {"autoscaling": {"minReplicas": 2, "maxReplicas": 5}})
    await eventually(lambda: admin.get_or_none(*HPA, "svc", ns), what="the HPA again")
    await writes_quiesce(operator)
    assert min(replicas_seen(deployment_watch)) == 3, replicas_seen(deployment_watch)
    # Converged: a reconcile finds nothing more to write (its Events, if any, written too).
    quiet = operator.mutating_requests()
    await reconcile_now(operator.controllers.inference_services.controller, ObjectKey(ns, "svc"))
    await operator.manager.recorder.drain()
    assert operator.mutating_requests() == quiet


@pytest.mark.parametrize(
    ("replicas", "autoscaling", "expected"),
    [
        pytest.param(3, {"minReplicas": 1, "maxReplicas": 5}, 3, id="spec.replicas"),
        pytest.param(1, {"minReplicas": 2, "maxReplicas": 5}, 2, id="raised-to-minReplicas"),
        pytest.param(7, {"minReplicas": 1, "maxReplicas": 4}, 4, id="lowered-to-maxReplicas"),
    ],
)
async def test_a_new_autoscaled_deployment_starts_at_spec_replicas_within_the_hpa_bounds(
    operator: RunningController,
    full_namespace: str,
    deployment_watch: StatusWatch,
    replicas: int,
    autoscaling: dict[str, int],
    expected: int,
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(
        isvc("svc", modelRef="m", skipModelInit=True, replicas=replicas, autoscaling=autoscaling),
        namespace=ns,
    )
    await eventually(ready_at(admin, "svc", ns, expected), what=f"svc Ready with {expected}")
    await writes_quiesce(operator)
    seen = replicas_seen(deployment_watch)
    print(f"new autoscaled Deployment: spec.replicas seen = {seen}")
    assert seen and set(seen) == {expected}, seen


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({"app.kubernetes.io/managed-by": "llmkube"}, id="in-the-controller-cache"),
        pytest.param(None, id="not-cached"),
    ],
)
async def test_an_hpa_that_is_not_ours_gets_no_replicas_and_the_service_keeps_its_pods(
    operator: RunningController,
    full_namespace: str,
    deployment_watch: StatusWatch,
    labels: dict[str, str] | None,
) -> None:
    """Autoscaling on while someone else's HPA has the name: the service reports the conflict, and
    its running replicas are not touched (nobody would scale them)."""
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("svc", modelRef="m", skipModelInit=True, replicas=3), namespace=ns)
    await eventually(ready_at(admin, "svc", ns, 3), what="svc Ready with 3 replicas")
    theirs = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "svc", "labels": labels or {"team": "someone-else"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "elsewhere"},
            "minReplicas": 1,
            "maxReplicas": 2,
        },
    }
    admin.create(theirs, namespace=ns)
    patch_isvc(admin, "svc", ns, {"autoscaling": {"maxReplicas": 5}})
    failed = await eventually(phase_is(admin, "InferenceService", "svc", ns, "Failed"), what="svc Failed")
    assert condition_triple(failed, "Degraded") is not None
    await writes_quiesce(operator)
    assert min(replicas_seen(deployment_watch)) == 3, replicas_seen(deployment_watch)
    assert admin.get("apps/v1", "Deployment", "svc", ns)["spec"]["replicas"] == 3
    assert admin.get(*HPA, "svc", ns)["spec"]["scaleTargetRef"]["name"] == "elsewhere"
    assert admin.get(API, "InferenceService", "svc", ns)["spec"]["replicas"] == 3
