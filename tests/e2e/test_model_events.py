"""Models tell their history as Events (events.k8s.io/v1, by the controller's identity): a copy
started, Ready with the size, a copy that failed; each transition once."""

from pathlib import Path
from typing import Any

import pytest
from e2e_support import RunningController, eventually, model, phase_is
from llmkube_testing.llama_gguf import Shape, write_llama_gguf

# Their Models come from local files: the test namespaces allow them, as an admin would.
pytestmark = pytest.mark.local_sources

EVENTS = "events.k8s.io/v1"


def model_events(admin: Any, namespace: str, name: str) -> list[tuple[str, str, str]]:
    return sorted(
        (e["type"], e["reason"], e.get("note", ""))
        for e in admin.list(EVENTS, "Event", namespace)
        if (e.get("regarding") or {}).get("kind") == "Model" and e["regarding"]["name"] == name
    )


async def test_a_copied_model_reports_start_and_ready_and_a_missing_file_a_failure(
    operator: RunningController, full_namespace: str, tmp_path: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    source = tmp_path / "events.gguf"
    shape = Shape(embedding=64, layers=1, heads=4, kv_heads=4, feed_forward=64, vocab=300, type="f32")
    write_llama_gguf(source, shape)
    admin.create(model("copied", source=f"file://{source}"), namespace=ns)
    await eventually(phase_is(admin, "Model", "copied", ns, "Ready"), what="copied Ready")

    def both() -> list[tuple[str, str, str]] | None:
        found = model_events(admin, ns, "copied")
        return found if {r for _, r, _ in found} >= {"CopyStarted", "Ready"} else None

    events = await eventually(both, what="CopyStarted and Ready events")
    assert ("Normal", "CopyStarted", "Started copying local model") in events
    ready = [note for _, reason, note in events if reason == "Ready"]
    assert len(ready) == 1 and ready[0].startswith("Model downloaded and cached (")

    admin.create(model("gone", source=f"file://{tmp_path / 'absent.gguf'}"), namespace=ns)
    await eventually(phase_is(admin, "Model", "gone", ns, "Failed"), what="gone Failed")
    failures = await eventually(
        lambda: [e for e in model_events(admin, ns, "gone") if e[0] == "Warning"], what="the failure Event"
    )
    assert failures[0][1] == "CopyFailed" and "absent.gguf" in failures[0][2]
