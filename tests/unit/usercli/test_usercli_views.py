"""What the list, status and queue columns say (pure)."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmkube.usercli import views

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z")


def isvc(
    name: str = "s", *, created: float = 60, spec: dict[str, Any] | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": stamp(created), "generation": 1},
        "spec": {"modelRef": "m", **(spec or {})},
        "status": status,
    }


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (600, "10m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 300, "3h5m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (40 * 86400, "40d"),
        (800 * 86400, "2y70d"),
    ],
)
def test_ages_read_like_kubectl(seconds: float, text: str) -> None:
    assert views.human_duration(seconds) == text


def test_queue_is_blank_unless_waiting_for_gpus() -> None:
    assert views.queue_column(isvc(phase="Ready", queuePosition=0)) == ""
    assert views.queue_column(isvc(phase="Creating")) == ""
    assert views.queue_column(isvc(phase="WaitingForGPU", queuePosition=2)) == "2"
    # A stale position on a service that no longer waits is not shown.
    assert views.queue_column(isvc(phase="Ready", queuePosition=3)) == ""


def test_reason_names_the_failure_or_the_scheduler_diagnosis() -> None:
    failed = isvc(
        phase="Failed",
        conditions=[{"type": "Degraded", "status": "True", "reason": "InvalidSpec", "message": "x"}],
    )
    assert views.service_reason(failed) == "InvalidSpec"
    assert views.service_reason(isvc(phase="Failed")) == "Failed"
    assert (
        views.service_reason(isvc(phase="WaitingForGPU", schedulingStatus="InsufficientGPU"))
        == "InsufficientGPU"
    )
    assert views.service_reason(isvc(phase="Ready")) == ""


def test_service_row() -> None:
    row = views.service_row(
        isvc(
            created=90,
            spec={"priority": "high"},
            phase="Ready",
            readyReplicas=2,
            desiredReplicas=2,
            endpoint="http://s.ns.svc.cluster.local:8080/v1/chat/completions",
        ),
        NOW,
    )
    assert (row.name, row.phase, row.replicas, row.queue, row.priority, row.age) == (
        "s",
        "Ready",
        "2/2",
        "",
        "high",
        "90s",
    )


def test_queue_rows_follow_stored_positions_and_say_how_long() -> None:
    def waiting(name: str, position: int, since: float, **spec: Any) -> dict[str, Any]:
        return isvc(
            name,
            spec=spec,
            phase="WaitingForGPU",
            queuePosition=position,
            effectivePriority=100000 if spec else 10000,
            waitingFor="nvidia.com/gpu: 2",
            conditions=[
                {
                    "type": "GPUAvailable",
                    "status": "False",
                    "reason": "InsufficientGPU",
                    "lastTransitionTime": stamp(since),
                }
            ],
        )

    rows = views.queue_rows(
        [waiting("b", 2, 300), isvc("r", phase="Ready"), waiting("a", 1, 30, priority="high")], NOW
    )
    assert [(r.position, r.name, r.priority, r.effective_priority, r.waiting) for r in rows] == [
        (1, "a", "high", "100000", "30s"),
        (2, "b", "normal", "10000", "5m"),
    ]
    assert rows[0].waiting_for == "nvidia.com/gpu: 2"


def test_queue_rows_say_which_quota_a_service_waits_on() -> None:
    quota = "GPUQuota team-a uses 6 of 8 GPUs, this replica needs 4"
    rows = views.queue_rows(
        [
            isvc(
                "q",
                phase="WaitingForGPU",
                queuePosition=1,
                schedulingStatus="QuotaExceeded",
                schedulingMessage=quota,
            ),
            isvc(
                "g",
                phase="WaitingForGPU",
                queuePosition=2,
                schedulingStatus="InsufficientGPU",
                schedulingMessage="0/3",
            ),
        ],
        NOW,
    )
    assert [(r.name, r.reason) for r in rows] == [("q", f"QuotaExceeded: {quota}"), ("g", "InsufficientGPU")]


def test_events_newest_last_limited_with_series_counts() -> None:
    events = [
        {
            "type": "Normal",
            "reason": f"R{i}",
            "involvedObject": {"kind": "Model"},
            "lastTimestamp": stamp(100 - i),
            "message": str(i),
        }
        for i in range(15)
    ]
    events.append(
        {
            "type": "Warning",
            "reason": "InvalidSpec",
            "involvedObject": {"kind": "InferenceService"},
            "eventTime": stamp(500),
            "series": {"count": 7, "lastObservedTime": stamp(1)},
            "message": "spec.resources.cpu: bad",
        }
    )
    rows = views.event_rows(events, NOW, limit=3)
    assert [(r.reason, r.count, r.age) for r in rows] == [
        ("R13", 1, "87s"),
        ("R14", 1, "86s"),
        ("InvalidSpec", 7, "1s"),
    ]


def test_what_a_service_waits_for() -> None:
    assert views.waits_for(isvc(phase="Pending"), None) == 'the Model "m" (it does not exist)'
    model = {"metadata": {"name": "m"}, "status": {"phase": "Downloading"}}
    assert views.waits_for(isvc(phase="Pending"), model) == 'the Model "m" to be Ready (it is Downloading)'
    gpu = isvc(phase="WaitingForGPU", queuePosition=3, waitingFor="nvidia.com/gpu: 4")
    assert views.waits_for(gpu, model) == "GPUs: nvidia.com/gpu: 4 (queue position 3)"
    assert views.waits_for(isvc(phase="Ready"), model) == ""


def test_model_row_hides_the_unknown_size() -> None:
    model = {
        "metadata": {"name": "m", "namespace": "ns", "creationTimestamp": stamp(10)},
        "spec": {"source": "https://x.invalid/m.gguf"},
        "status": {
            "phase": "Ready",
            "size": "0",
            "gguf": {"quantization": "Q4_K_M", "architecture": "llama"},
        },
    }
    row = views.model_row(model, NOW)
    assert (row.size, row.quantization, row.architecture, row.accelerator) == ("", "Q4_K_M", "llama", "cpu")


def test_memory_fit_line() -> None:
    def with_fit(status: str) -> dict[str, Any]:
        return isvc(
            phase="Ready",
            conditions=[{"type": "MemoryFit", "status": status, "reason": "R", "message": "needs ~1.3 GiB"}],
        )

    assert views.memory_fit_text(with_fit("True")) == "fits: needs ~1.3 GiB"
    assert views.memory_fit_text(with_fit("False")) == "may NOT fit: needs ~1.3 GiB"
    assert views.memory_fit_text(with_fit("Unknown")) == "unknown: needs ~1.3 GiB"
    assert views.memory_fit_text(isvc(phase="Ready")) == ""
