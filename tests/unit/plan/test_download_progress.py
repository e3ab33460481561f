"""A model download in progress shows in status, from the downloader's progress lines."""

from dataclasses import replace
from typing import Any

import pytest
from isvc_factories import live_deployment, observe
from isvc_planning import condition, plan

from llmkube.plan.inferenceservice.download import Download, download_progress, downloading_pod


def pod(name: str, init_state: str | None) -> dict[str, Any]:
    statuses = [{"name": "model-downloader", "state": {init_state: {}}}] if init_state else []
    return {
        "metadata": {"name": name, "labels": {"inference.llmkube.dev/service": "demo"}},
        "status": {"phase": "Pending", "initContainerStatuses": statuses},
    }


def test_the_pod_running_the_downloader_is_found() -> None:
    assert downloading_pod([pod("a", "terminated"), pod("b", "running")]) == "b"
    assert downloading_pod([pod("a", "waiting"), pod("c", None)]) is None


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (
            "Downloading x\nllmkube-download: 1073741824 of 4294967296 bytes (25%)\n",
            "1.0 GiB of 4.0 GiB (25%)",
        ),
        ("llmkube-download: 1 of 2 bytes (50%)\nllmkube-download: 3145728 bytes\n", "3.0 MiB so far"),
        ("Downloading x\n", "(pod p)"),
        (None, "(pod p)"),
    ],
)
def test_progress_from_the_last_line(log: str | None, expected: str) -> None:
    assert download_progress("p", log).message().endswith(expected)


def test_a_service_whose_pod_downloads_says_how_far_and_comes_back_to_update_it() -> None:
    observed = replace(
        observe(pods=(pod("demo-1", "running"),), deployment=live_deployment(ready=0)),
        download_log="llmkube-download: 536870912 of 2147483648 bytes (25%)\n",
    )
    result = plan(observed=observed)
    assert result.status.phase == "Creating"
    assert condition(result, "Available") == (
        "False",
        "Downloading",
        "Downloading the model: 512.0 MiB of 2.0 GiB (25%)",
    )
    assert result.requeue_after == 10.0
    # Once the download is over, the usual message, and no timed requeue.
    done = plan(observed=observe(pods=(pod("demo-1", "terminated"),), deployment=live_deployment(ready=0)))
    assert condition(done, "Available")[:2] == ("False", "Creating")  # type: ignore[index]
    assert done.requeue_after is None


def test_download_messages() -> None:
    assert Download("p", 5, 0).message() == "Downloading the model: 5 B so far"
    # The units of status.size, TiB included (a 1.5 TiB checkpoint is not "1536.0 GiB").
    assert (
        Download("p", 1536 * 1024**3, 3 * 1024**4).message()
        == "Downloading the model: 1.5 TiB of 3.0 TiB (50%)"
    )
