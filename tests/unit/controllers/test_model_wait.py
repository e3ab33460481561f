"""A service's first status waits (bounded) for its Model's first status: no Pending-then-Creating
pair of writes when both are created together."""

from datetime import UTC, datetime, timedelta

from llmkube.api.model import Model, ModelStatus
from llmkube.controllers.model_wait import ModelWait
from llmkube.kube.types import ObjectKey

KEY = ObjectKey("ns", "svc")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def model(status: ModelStatus | None) -> Model:
    return Model.model_validate(
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {"source": "org/m-GGUF"},
            "status": status.model_dump(by_alias=True, exclude_none=True, mode="json") if status else None,
        }
    )


def test_a_model_without_status_holds_the_service_for_a_bounded_time() -> None:
    wait = ModelWait(hold_seconds=15)
    assert wait.hold(KEY, model(None), T0) == 15
    assert wait.hold(KEY, model(None), T0 + timedelta(seconds=10)) == 5
    assert wait.hold(KEY, model(None), T0 + timedelta(seconds=15)) is None  # long enough: plan (Pending)
    assert wait.hold(KEY, model(None), T0 + timedelta(seconds=20)) is None


def test_a_model_with_a_status_or_a_missing_model_is_planned_at_once() -> None:
    wait = ModelWait(hold_seconds=15)
    assert wait.hold(KEY, model(None), T0) == 15
    assert wait.hold(KEY, model(ModelStatus(phase="Ready")), T0 + timedelta(seconds=1)) is None
    # the wait starts afresh for a Model that (again) has no status: e.g. deleted and recreated
    assert wait.hold(KEY, model(None), T0 + timedelta(seconds=2)) == 15
    assert wait.hold(KEY, None, T0 + timedelta(seconds=3)) is None  # missing: planned (Failed) at once
    wait.forget(KEY)
    assert wait.hold(KEY, model(None), T0 + timedelta(seconds=4)) == 15
