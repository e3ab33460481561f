from datetime import UTC, datetime, timedelta

from llmkube.api.meta import Condition
from llmkube.plan.conditions.standard import find_condition
from llmkube.plan.model import conditions as cond

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def c(type_: str, status: str, reason: str = "Old", at: datetime = T0) -> Condition:
    return Condition.model_validate(
        {"type": type_, "status": status, "reason": reason, "message": "old", "lastTransitionTime": at}
    )


def by_type(conditions: list[Condition]) -> dict[str, tuple[str, str, str, datetime]]:
    return {x.type: (x.status, x.reason, x.message, x.last_transition_time) for x in conditions}


def test_mark_ready_clears_progressing_and_degraded_but_adds_nothing_else() -> None:
    before = [c("Progressing", "True"), c("Degraded", "True")]
    after = cond.mark_ready(
        before, reason="ModelReady", message="m", superseded_message="s", now=T1, generation=4
    )
    assert by_type(after) == {
        "Progressing": ("False", "Superseded", "s", T1),
        "Degraded": ("False", "Superseded", "s", T1),
        "Available": ("True", "ModelReady", "m", T1),
    }
    assert {x.observed_generation for x in after} == {4}
    # A fresh Model gets Available only: conditions never written stay absent.
    fresh = cond.mark_ready(None, reason="R", message="m", superseded_message="s", now=T1, generation=None)
    assert [x.type for x in fresh] == ["Available"]


def test_transition_time_moves_only_on_flips() -> None:
    before = [c("Available", "True", "ModelReady"), c("Progressing", "False", "Superseded")]
    after = cond.mark_ready(
        before, reason="ModelReady", message="m", superseded_message="s", now=T1, generation=1
    )
    assert {x.type: x.last_transition_time for x in after} == {"Available": T0, "Progressing": T0}


def test_mark_progressing_turns_available_false_and_optionally_clears_degraded() -> None:
    before = [c("Available", "True"), c("Degraded", "True")]
    kept = cond.mark_progressing(
        before, reason="CopyStarted", message="m", clear_degraded=False, now=T1, generation=1
    )
    assert by_type(kept) == {
        "Available": ("False", "CopyStarted", "m", T1),
        "Degraded": ("True", "Old", "old", T0),
        "Progressing": ("True", "CopyStarted", "m", T1),
    }
    cleared = cond.mark_progressing(
        before, reason="PVCNotBound", message="m", clear_degraded=True, now=T1, generation=1
    )
    assert by_type(cleared)["Degraded"] == ("False", "PVCNotBound", "m", T1)


def test_mark_failed_turns_available_and_progressing_false() -> None:
    before = [c("Available", "True"), c("Progressing", "True")]
    after = cond.mark_failed(before, reason="CopyFailed", message="boom", now=T1, generation=1)
    assert by_type(after) == {
        "Available": ("False", "CopyFailed", "boom", T1),
        "Progressing": ("False", "CopyFailed", "boom", T1),
        "Degraded": ("True", "CopyFailed", "boom", T1),
    }


def test_source_drifted_messages_and_no_churn() -> None:
    drifted = cond.mark_source_drifted(None, drifted=True, source="https://h/m.gguf", now=T0, generation=1)
    assert by_type(drifted)["SourceDrifted"] == (
        "True",
        "UpstreamChanged",
        'Upstream source "https://h/m.gguf" differs from the cached copy',
        T0,
    )
    in_sync = cond.mark_source_drifted(drifted, drifted=False, source="x", now=T1, generation=1)
    assert by_type(in_sync)["SourceDrifted"] == (
        "False",
        "InSync",
        "Cached model matches the upstream source",
        T1,
    )
    again = cond.mark_source_drifted(
        in_sync, drifted=False, source="x", now=T1 + timedelta(hours=1), generation=1
    )
    assert find_condition(again, "SourceDrifted") == find_condition(in_sync, "SourceDrifted")


def test_messages_quote_like_go() -> None:
    assert cond.msg_pvc_not_found("models", "ml") == 'PVC "models" not found in namespace "ml"'
    assert (
        cond.msg_pvc_not_bound("models", "Pending") == 'PVC "models" is Pending, waiting for it to be Bound'
    )
    assert cond.msg_pvc_model_ready("models") == 'Model available on PVC "models"'
    assert cond.go_quote('a"b\\c') == '"a\\"b\\\\c"'
