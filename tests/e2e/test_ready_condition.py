"""The Ready condition on the real control plane: True only while every replica serves the current
spec. A spec change to a Ready service takes Ready away (RollingOut, for the new generation) until the
Deployment controller has rolled the new template out; Models say Ready too (plan/conditions/summary.py)."""

from typing import Any

import pytest
from argocd_health import health
from e2e_support import (
    API,
    RunningController,
    StatusWatch,
    eventually,
    hf_model,
    isvc,
    patch_isvc,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
)

pytestmark = pytest.mark.usefixtures("services_deleted_first")


def summary(status: dict[str, Any]) -> dict[str, tuple[str, str, int | None]]:
    return {
        c["type"]: (c["status"], c["reason"], c.get("observedGeneration"))
        for c in status.get("conditions") or ()
        if c["type"] in ("Ready", "Reconciling", "Stalled")
    }


def rolled_out(deployment: dict[str, Any]) -> bool:
    status, wanted = deployment.get("status") or {}, deployment["spec"]["replicas"]
    return (
        status.get("observedGeneration") == deployment["metadata"]["generation"]
        and status.get("updatedReplicas") == wanted
        and status.get("replicas") == wanted
        and status.get("readyReplicas") == wanted
    )


async def test_a_spec_change_takes_ready_away_until_the_rollout_is_done(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    admin.create(
        isvc("gen", modelRef="m", runtime="generic", image="registry.invalid/srv:1", replicas=2), namespace=ns
    )
    await eventually(phase_is(admin, "InferenceService", "gen", ns, "Ready"), what="gen Ready")

    def ready_for_current_generation() -> bool:
        obj = admin.get(API, "InferenceService", "gen", ns)
        return summary(obj["status"]).get("Ready") == ("True", "Ready", obj["metadata"]["generation"])

    await eventually(ready_for_current_generation, what="Ready=True for generation 1")
    model = admin.get(API, "Model", "m", ns)
    assert summary(model["status"])["Ready"][0] == "True"
    assert summary(model["status"])["Reconciling"][0] == "False"

    watch = StatusWatch(admin, "InferenceService", "gen", ns).start()
    try:
        changed = patch_isvc(admin, "gen", ns, {"args": ["--new-flag"]})
        generation = changed["metadata"]["generation"]
        await eventually(
            ready_for_current_generation, within=90, what=f"Ready=True for generation {generation}"
        )
        deployment = admin.get("apps/v1", "Deployment", "gen", ns)
        assert rolled_out(deployment), deployment["status"]
    finally:
        watch.stop()

    seen = [summary(status) for status in watch.statuses]
    for_new = [s for s in seen if s.get("Ready", ("", "", None))[2] == generation]
    # The first status written for the new generation already says it is rolling out, and Ready
    # comes back for it only after that.
    assert for_new, seen
    assert for_new[0]["Ready"][:2] == ("False", "RollingOut"), for_new
    assert for_new[0]["Reconciling"][:2] == ("True", "RollingOut"), for_new
    assert for_new[-1]["Ready"][:2] == ("True", "Ready")
    assert for_new[-1]["Reconciling"][:2] == ("False", "Ready")
    # The phase kept the reference's meaning throughout (ready pods counted, old ones included).
    assert "Failed" not in watch.phases()
    # Argo CD's health check (manifests/gitops/argocd) reads the same objects the same way.
    objects = [
        o
        for o in watch.objects
        if summary(o.get("status") or {}).get("Ready", ("", "", None))[2] == generation
    ]
    assert health(objects[0]).status == "Progressing"
    assert health(objects[0]).message.startswith("RollingOut: Rolling out the current spec")
    assert health(objects[-1]).status == "Healthy"
