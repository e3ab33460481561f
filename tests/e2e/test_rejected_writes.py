"""A write the API server keeps refusing, for a reason the planner cannot see (here a cluster
policy, a ValidatingAdmissionPolicy that denies our Deployments): the service says Failed with the
server's reason, the controller retries with backoff, the retries write no new status (it is
written once, its transition times do not move), and each refusal is one Warning Event, the repeats
aggregated into its series.

And the safety net: a refusal the planner did not foresee names the InferenceService's field, not
the Deployment's."""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_support import (
    API,
    RunningController,
    StatusWatch,
    eventually,
    hf_model,
    isvc,
    patch_isvc,
    phase_is,
    poll,
    reconcile_log,
    services_deleted_first,  # noqa: F401  (a fixture)
    settled,
    watch_reaches,
)
from llmkube_testing.rest import KubeRest, RestError

from llmkube.kube.types import ObjectKey

pytestmark = pytest.mark.usefixtures("services_deleted_first")

POLICY_MESSAGE = "inference pods must run in gVisor"
EVENTS = "events.k8s.io/v1"


@pytest.fixture
def deny_deployments(operator: RunningController, full_namespace: str) -> Iterator[str]:
    """A cluster policy the planner knows nothing about: Deployments of this namespace must ask for
    the gVisor RuntimeClass, or the server refuses them (422)."""
    admin = operator.cluster.admin()
    name = f"gvisor-only-{uuid.uuid4().hex[:6]}"
    label = {"llmkube-test-policy": name}
    namespace = admin.get("v1", "Namespace", full_namespace)
    namespace["metadata"].setdefault("labels", {}).update(label)
    admin.request("PUT", admin.path_for("v1", "Namespace", name=full_namespace), namespace)
    admin.apply(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["deployments"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "has(object.spec.template.spec.runtimeClassName) && "
                        "object.spec.template.spec.runtimeClassName == 'gvisor'",
                        "message": POLICY_MESSAGE,
                        "reason": "Invalid",
                    }
                ],
            },
        }
    )
    admin.apply(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": label}},
            },
        }
    )
    wait_for_policy(admin, full_namespace)
    yield name
    for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
        admin.delete("admissionregistration.k8s.io/v1", kind, name)


def wait_for_policy(admin: KubeRest, namespace: str) -> None:
    """The policy is enforced once a dry-run Deployment is refused (it takes effect asynchronously)."""
    probe = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "policy-probe", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }

    def refused() -> bool:
        try:
            admin.request(
                "POST", admin.path_for("apps/v1", "Deployment", namespace), probe, query={"dryRun": "All"}
            )
        except RestError as error:
            return error.status == 422
        return False

    from llmkube_testing.rest import wait_until

    wait_until(refused, timeout=30, what="the admission policy to be enforced")


def condition_times(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["lastTransitionTime"] for c in status.get("conditions") or []}


async def test_a_write_that_keeps_being_refused_is_reported_once(
    operator: RunningController, full_namespace: str, deny_deployments: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    log = reconcile_log(operator.controllers.inference_services.controller)
    admin.create(hf_model("m"), namespace=ns)
    admin.create(isvc("refused", modelRef="m", skipModelInit=True), namespace=ns)
    status = await eventually(phase_is(admin, "InferenceService", "refused", ns, "Failed"), what="Failed")
    degraded = {c["type"]: c for c in status["conditions"]}["Degraded"]
    assert degraded["status"] == "True" and POLICY_MESSAGE in degraded["message"], degraded
    assert admin.get_or_none("apps/v1", "Deployment", "refused", ns) is None

    # The controller retries with backoff (5 ms doubling); over ~12 s that is several attempts.
    key = ObjectKey(ns, "refused")
    stored = admin.get(API, "InferenceService", "refused", ns)
    watch = StatusWatch(admin, "InferenceService", "refused", ns).start()
    try:
        before = log(key)
        await poll(lambda: log(key) >= before + 4, within=60, what="four more retries")
        await settled(operator.controllers.inference_services.controller)  # the fourth one finished
        now = admin.get(API, "InferenceService", "refused", ns)
        # The watch has delivered the object as the API server has it now: had a retry written a
        # status, the watch has it.
        await watch_reaches(watch, now["metadata"]["resourceVersion"])
    finally:
        watch.stop()
    # No status write while it keeps failing the same way: the watch saw no new status, and the
    # resourceVersion and the transition times of the stored status do not move.
    retries = log(key) - before
    assert len(watch.statuses) - 1 == 0, f"{len(watch.statuses) - 1} status writes in {retries} retries"
    assert now["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert condition_times(now["status"]) == condition_times(stored["status"])
    assert degraded["reason"] == "Failed"
    assert degraded["message"].startswith("the API server refused the Deployment: 422 Invalid: ")

    # One Warning Event says why, and the retries count in its series (not one Event each).
    await operator.manager.recorder.drain()
    (event,) = await eventually(lambda: events_of(admin, ns, "refused", "WriteFailed"), what="the Event")
    assert event["type"] == "Warning" and event["note"] == degraded["message"]
    assert (event.get("series") or {}).get("count", 1) >= 2, event


def events_of(admin: KubeRest, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        event
        for event in admin.list(EVENTS, "Event", namespace)
        if (event.get("regarding") or {}).get("name") == name and event["reason"] == reason
    ]


async def test_a_refusal_the_planner_did_not_foresee_names_the_services_field(
    operator: RunningController, full_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planner's own object checks switched off (as if it missed a rule): the server refuses the
    Deployment with `spec.template.spec.containers[0].env[N].name`, and the user is told
    `spec.env[0].name`, as an invalid spec."""
    monkeypatch.setattr("llmkube.plan.inferenceservice.planner.object_issues", lambda spec, deployment: [])
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    spec = {"modelRef": "m", "skipModelInit": True, "runtime": "vllm", "env": [{"name": "A=B", "value": "1"}]}
    admin.create(isvc("unforeseen", **spec), namespace=ns)
    status = await eventually(phase_is(admin, "InferenceService", "unforeseen", ns, "Failed"), what="Failed")
    degraded = {c["type"]: c for c in status["conditions"]}["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")
    assert degraded["message"] == (
        'the API server refused the Deployment: spec.env[0].name: Invalid value: "A=B": a valid environment '
        "variable name must consist only of printable ASCII characters other than '='"
    )
    await operator.manager.recorder.drain()
    (event,) = await eventually(lambda: events_of(admin, ns, "unforeseen", "InvalidSpec"), what="the Event")
    assert event["note"] == degraded["message"]
    monkeypatch.undo()
    # Fixed by the user, it converges (and says so).
    patch_isvc(admin, "unforeseen", ns, {"env": [{"name": "A_B", "value": "1"}]})
    await eventually(phase_is(admin, "InferenceService", "unforeseen", ns, "Ready"), what="Ready")
