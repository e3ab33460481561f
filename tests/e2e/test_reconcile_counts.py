"""`llmkube_reconcile_total` counts what its name says: every reconcile that finished, as
controller-runtime's `controller_runtime_reconcile_total` does (the reference counted a service's
transitions into Ready and some Model paths: 3 against controller-runtime's 59 in one run)."""

import aiohttp
import pytest
from e2e_support import (
    RunningController,
    eventually,
    hf_model,
    isvc,
    model,
    patch_isvc,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
    settled,
)
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.usefixtures("services_deleted_first")

CONTROLLERS = ("inferenceservice", "model")


async def reconcile_counts(operator: RunningController) -> dict[str, dict[str, float]]:
    """Per controller: llmkube's count, controller-runtime's, and llmkube's duration count."""
    url = operator.manager.http.url("metrics") + "/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    counts = {c: {"llmkube": 0.0, "controller_runtime": 0.0, "duration": 0.0} for c in CONTROLLERS}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            controller = sample.labels.get("controller")
            if controller not in counts:
                continue
            if sample.name == "llmkube_reconcile_total":
                counts[controller]["llmkube"] += sample.value
            elif sample.name == "controller_runtime_reconcile_total":
                counts[controller]["controller_runtime"] += sample.value
            elif sample.name == "llmkube_reconcile_duration_seconds_count":
                counts[controller]["duration"] += sample.value
    return counts


async def test_llmkube_reconcile_total_counts_every_reconcile(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    before = await reconcile_counts(operator)
    admin.create(hf_model("m"), namespace=ns)
    admin.create(model("broken", source="pvc://no-such-claim/model.gguf"), namespace=ns)  # fails, retried
    admin.create(isvc("chat", modelRef="m", skipModelInit=True), namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "chat", ns, "Ready"), what="chat Ready")
    patch_isvc(admin, "chat", ns, {"replicas": 2})
    await eventually(phase_is(admin, "Model", "broken", ns, "Failed"), what="broken Failed")
    await settled(operator.controllers.inference_services.controller)
    after = await reconcile_counts(operator)
    for controller in CONTROLLERS:
        delta = {key: after[controller][key] - before[controller][key] for key in after[controller]}
        assert delta["llmkube"] > 0, (controller, delta)
        assert delta["llmkube"] == delta["controller_runtime"] == delta["duration"], (controller, delta)
