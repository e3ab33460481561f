"""The user commands on a cluster where llmkube is not (yet) whole, as a person runs them: without
the CRDs they say so and how to install them (not `creating Model "x" not found`); without a
controller, `deploy` follows the objects with watches and says within seconds that nothing acts on
them (it looked like `Pending` for ten minutes)."""

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests

from llmkube.api.crds import all_crds

SOURCE = "https://models.invalid/tiny-chat-Q4_K_M.gguf"


async def llmkube(kubeconfig: Path, *args: str, within: float = 120) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llmkube.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"},
    )
    out, err = await asyncio.wait_for(process.communicate(), within)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture(scope="module")
def bare_cluster() -> Iterator[LocalCluster]:
    """An API server that has never seen llmkube's CRDs (the shared one gets them from other tests)."""
    with LocalCluster("api") as cluster:
        yield cluster


@pytest.mark.parametrize(
    "args",
    [
        ("deploy", SOURCE, "--memory", "1Gi"),
        ("list",),
        ("status", "tiny"),
        ("delete", "tiny"),
    ],
)
async def test_without_the_crds_every_command_says_they_are_not_installed(
    bare_cluster: LocalCluster, args: tuple[str, ...]
) -> None:
    code, out, err = await llmkube(bare_cluster.kubeconfig, *args)
    assert code == 1, out + err
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in out + err, err
    assert lines[0].startswith(
        f"error: the llmkube CRDs are not installed in the cluster at {bare_cluster.server}: it serves no "
        "models, inferenceservices of inference.llmkube.dev/v1alpha1. Install llmkube first: helm install"
    ), lines[0]


async def test_a_name_that_does_not_exist_is_still_said_as_such_where_the_crds_are(
    api_cluster: ClusterHandle, namespace: str
) -> None:
    apply_manifests(api_cluster, all_crds())
    code, _, err = await llmkube(api_cluster.kubeconfig, "status", "nobody", "-n", namespace)
    assert code == 1
    assert "not found" in err and "CRDs" not in err, err


async def test_without_a_controller_deploy_says_nothing_acts_on_the_objects(
    api_cluster: ClusterHandle, namespace: str
) -> None:
    apply_manifests(api_cluster, all_crds())
    started = time.monotonic()
    code, out, err = await llmkube(
        api_cluster.kubeconfig,
        "deploy",
        SOURCE,
        "--memory",
        "1Gi",
        "-n",
        namespace,
        "--fit-wait",
        "0",
        "--timeout",
        "20",
    )
    took = time.monotonic() - started
    text = " ".join((out + err).split())
    assert code == 1, text
    assert (
        'Nothing has written a status to Model or InferenceService "tiny-chat" in 15s: the llmkube '
        "controller is not acting on them. Is it running?"
    ) in text, text
    assert text.count("Nothing has written a status") == 1  # said once, not every second
    assert "Not Ready after 20s" in text
    assert took < 40, took
