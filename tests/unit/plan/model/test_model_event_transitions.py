"""Model Events come from status transitions: one per change, none when nothing changed."""

from datetime import UTC, datetime
from typing import Any

from llmkube.api.model import ModelStatus
from llmkube.plan.model import model_events

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def status(phase: str | None, *conditions: tuple[str, str, str, str], **fields: Any) -> ModelStatus:
    return ModelStatus.model_validate(
        {
            "phase": phase,
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": NOW}
                for t, s, r, m in conditions
            ],
            **fields,
        }
    )


COPYING = ("Progressing", "True", "CopyStarted", "Started copying local model")
COPIED = ("Progressing", "False", "Superseded", "done")
READY = ("Available", "True", "ModelReady", "Model downloaded and cached")


def test_a_copy_then_ready() -> None:
    started = status("Copying", COPYING)
    assert [(e.type, e.reason, e.message) for e in model_events(None, started)] == [
        ("Normal", "CopyStarted", "Started copying local model")
    ]
    ready = status("Ready", COPIED, READY, size="4.6 GiB")
    assert [(e.type, e.reason, e.message) for e in model_events(started, ready)] == [
        ("Normal", "Ready", "Model downloaded and cached (4.6 GiB)")
    ]
    assert model_events(ready, ready) == []  # nothing changed: no event


def test_failures_and_drift_are_warnings_once() -> None:
    failed = status("Failed", ("Degraded", "True", "CopyFailed", "open /m.gguf: no such file"))
    events = model_events(status("Copying", COPYING), failed)
    assert [(e.type, e.reason) for e in events] == [("Warning", "CopyFailed")]
    assert model_events(failed, failed) == []
    drifted = status("Ready", READY, ("SourceDrifted", "True", "UpstreamChanged", 'source "x" changed'))
    assert [(e.type, e.reason) for e in model_events(status("Ready", READY), drifted)] == [
        ("Warning", "UpstreamChanged")
    ]


def test_a_runtime_resolved_model_is_ready_without_a_size() -> None:
    ready = status("Ready", ("Available", "True", "RuntimeResolved", "runtime will fetch"), size="0")
    assert [(e.reason, e.message) for e in model_events(status("Pending"), ready)] == [
        ("Ready", "runtime will fetch")
    ]
