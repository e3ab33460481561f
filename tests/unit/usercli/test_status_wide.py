"""`llmkube status NAME -o wide` shows the replicas as `kubectl get pods -o wide` does (pure rows), and
the listing verbs take kubectl's -l (and -A where more than one namespace makes sense)."""

from datetime import UTC, datetime
from typing import Any

import pytest

from llmkube.cli import build_parser
from llmkube.usercli.views import POD_HEADERS, pod_row

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def pod(status: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "svc-abc", "creationTimestamp": "2026-05-01T11:55:00Z", **meta},
        "spec": {"nodeName": "node-1", "containers": [{"name": "llama-server"}]},
        "status": status,
    }


@pytest.mark.parametrize(
    ("status", "meta", "row"),
    [
        (
            {
                "phase": "Running",
                "podIP": "10.0.0.7",
                "containerStatuses": [{"ready": True, "restartCount": 2}],
            },
            {},
            ("svc-abc", "1/1", "Running", "2", "5m", "10.0.0.7", "node-1"),
        ),
        (
            {
                "phase": "Pending",
                "initContainerStatuses": [
                    {"ready": False, "state": {"waiting": {"reason": "PodInitializing"}}}
                ],
                "containerStatuses": [{"ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
            },
            {},
            ("svc-abc", "0/1", "PodInitializing", "0", "5m", "<none>", "node-1"),
        ),
        (
            {"phase": "Running", "containerStatuses": [{"ready": True}]},
            {"deletionTimestamp": "2026-05-01T11:59:00Z"},
            ("svc-abc", "1/1", "Terminating", "0", "5m", "<none>", "node-1"),
        ),
    ],
)
def test_pod_rows(status: dict[str, Any], meta: dict[str, Any], row: tuple[str, ...]) -> None:
    assert len(POD_HEADERS) == len(row)
    assert pod_row(pod(status, **meta), NOW) == row


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["status", "x", "-o", "wide"], {"output": "wide"}),
        (["queue", "-l", "team=ml"], {"selector": "team=ml"}),
        (["cache", "list", "-A", "-l", "team=ml"], {"selector": "team=ml", "all_namespaces": True}),
        (["list", "-A", "-l", "team=ml"], {"selector": "team=ml", "all_namespaces": True}),
    ],
)
def test_the_flags_parse(argv: list[str], expected: dict[str, Any]) -> None:
    args = vars(build_parser().parse_args(argv))
    assert {key: args[key] for key in expected} == expected
