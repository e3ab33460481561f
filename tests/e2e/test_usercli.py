"""The user commands, run as separate processes against the full local control plane and the
controller: deploy -> list -> status -> chat/curl/logs -> scale -> delete, the GPU queue, dry
runs for GitOps, refusals, and what a terminal shows.

chat and curl go through the API server's pods/portforward to kwok's kubelet API, which answers
with llmkube_testing.stdio_http (a stand-in for llama.cpp's server): the wiring is real end to
end, the model is not.
"""

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from e2e_support import (
    API,
    RunningController,
    condition_triple,
    delete_services_and_wait,
    eventually,
    gpus_idle,
    patch,
    phase_is,
    status_of,
)
from llmkube_testing.pytest_plugin import ClusterHandle
from usercli_support import llmkube, llmkube_in_terminal, plain, row_of

SOURCE = "https://models.invalid/tiny-chat-Q4_K_M.gguf"


@pytest.fixture(autouse=True)
async def services_gone_before_the_namespace(
    operator: RunningController, full_namespace: str
) -> AsyncIterator[None]:
    """The GPUs held by a test's pods are free for the next test, and the controller is never
    asked to converge a service in a namespace being deleted."""
    yield
    await delete_services_and_wait(operator, full_namespace, pods_too=True)


async def test_deploy_list_status_chat_curl_logs_delete(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    deployed = await llmkube(kc, "deploy", SOURCE, "-n", ns, "--memory", "1Gi", "--timeout", "90")
    assert deployed.code == 0, deployed.text
    assert 'Model "tiny-chat" applied' in deployed.out
    assert f'InferenceService "tiny-chat" applied in namespace "{ns}"' in deployed.out
    assert "Model: Ready, Service: Ready (1/1 ready)" in deployed.out
    assert (
        f'"tiny-chat" is Ready: http://tiny-chat.{ns}.svc.cluster.local:8080/v1/chat/completions'
        in deployed.out
    )

    listed = await llmkube(kc, "list", "-n", ns)
    row = row_of(listed.out, "tiny-chat")
    assert (row["PHASE"], row["REPLICAS"], row["QUEUE"], row["REASON"], row["PRIORITY"]) == (
        "Ready",
        "1/1",
        "",
        "",
        "normal",
    )
    models = await llmkube(kc, "list", "models", "-n", ns)
    assert row_of(models.out, "tiny-chat")["PHASE"] == "Ready"

    status = await llmkube(kc, "status", "tiny-chat", "-n", ns)
    assert status.code == 0, status.text
    for expected in (
        f"InferenceService {ns}/tiny-chat",
        "Phase:",
        "Ready",
        f"Model {ns}/tiny-chat",
        "Conditions",
        "Inference service is ready and serving requests",
        "Recent events",
    ):
        assert expected in status.out, f"{expected!r} not in:\n{status.out}"
    assert re.search(rf"Source:\s+{re.escape(SOURCE)}", status.out)

    chat = await llmkube(kc, "chat", "tiny-chat", "-n", ns, "What is 2+2?")
    assert chat.code == 0, chat.text
    assert (
        chat.out.strip()
        == "This is kwok's stand-in for llama.cpp (no model runs here). You said: What is 2+2?"
    )
    assert "via port-forward to tiny-chat-" in chat.err

    as_json = await llmkube(kc, "chat", "tiny-chat", "-n", ns, "hi", "-o", "json")
    assert yaml.safe_load(as_json.out)["usage"]["prompt_tokens"] == 1

    health = await llmkube(kc, "curl", "tiny-chat", "-n", ns, "-i")
    assert (health.code, health.out.splitlines()[0]) == (0, "HTTP 200"), health.text
    assert '{"status": "ok"}' in health.out
    missing = await llmkube(kc, "curl", "tiny-chat", "/nope", "-n", ns)
    assert missing.code == 1 and "not found" in missing.out

    logs = await llmkube(kc, "logs", "tiny-chat", "-n", ns, "--tail", "1")
    assert logs.code == 0, logs.text
    assert logs.out.strip() == "main: server is listening on http://0.0.0.0:8080 (stand-in)"

    # The same binary as a kubectl plugin.
    plugin = await llmkube(kc, "list", "-n", ns, "-o", "json", module="llmkube.usercli")
    assert [item["metadata"]["name"] for item in yaml.safe_load(plugin.out)["items"]] == ["tiny-chat"]

    deleted = await llmkube(kc, "delete", "tiny-chat", "-n", ns)
    assert deleted.code == 0, deleted.text
    assert 'InferenceService "tiny-chat" deleted' in deleted.out
    assert 'Model "tiny-chat" deleted' in deleted.out
    admin = full_cluster.admin()
    assert admin.get_or_none(API, "InferenceService", "tiny-chat", ns) is None
    empty = await llmkube(kc, "list", "-n", ns)
    assert (empty.code, empty.out) == (0, "")  # as kubectl: the note goes to stderr
    assert empty.err.strip() == f'No InferenceServices found in namespace "{ns}".'


async def test_queue_lists_waiting_services_by_priority_with_reason_and_blank_queue_elsewhere(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    """A critical service holds the only node with two GPUs (kwok-gpu-0): two more that ask for two
    wait, the high-priority one first; one asking for four (no node has four) is not queued."""
    kc, ns = full_cluster.kubeconfig, full_namespace
    admin = full_cluster.admin()
    await gpus_idle(admin)
    run = await llmkube(
        kc, "deploy", SOURCE, "--name", "holder", "-n", ns, "--gpu", "2", "--priority", "critical"
    )
    assert run.code == 0, run.text
    for name, extra in (("later-normal", []), ("first-high", ["--priority", "high"])):
        run = await llmkube(kc, "deploy", SOURCE, "--name", name, "-n", ns, "--gpu", "2", "--no-wait", *extra)
        assert run.code == 0, run.text
    run = await llmkube(kc, "deploy", SOURCE, "--name", "too-big", "-n", ns, "--gpu", "4", "--no-wait")
    assert run.code == 0, run.text
    for name in ("later-normal", "first-high"):
        await eventually(phase_is(admin, "InferenceService", name, ns, "WaitingForGPU"), what=f"{name} waits")
    await eventually(
        lambda: (
            status_of(admin, "InferenceService", "too-big", ns).get("schedulingStatus") == "Unschedulable"
        ),
        what="too-big Unschedulable",
    )

    await eventually(lambda: _ranked(admin, ns), what="both ranked, high priority first")
    queue = await llmkube(kc, "queue")
    assert queue.code == 0, queue.text
    rows = [line for line in plain(queue.out).splitlines() if f" {ns} " in f" {line} "]
    assert [("first-high" in r, "later-normal" in r) for r in rows] == [(True, False), (False, True)], (
        queue.out
    )
    high = row_of(queue.out, "first-high")
    assert (high["PRIORITY"], high["VALUE"], high["WAITING FOR"]) == ("high", "100000", "nvidia.com/gpu: 2")
    assert high["WAITING"].endswith("s")
    assert "too-big" not in queue.out

    listed = await llmkube(kc, "list", "-n", ns)
    waiting = row_of(listed.out, "first-high")
    assert (waiting["PHASE"], waiting["REASON"], waiting["REPLICAS"]) == (
        "WaitingForGPU",
        "InsufficientGPU",
        "0/1",
    )
    assert int(waiting["QUEUE"]) < int(row_of(listed.out, "later-normal")["QUEUE"])
    too_big = row_of(listed.out, "too-big")
    assert (too_big["PHASE"], too_big["REASON"], too_big["QUEUE"]) == ("Creating", "Unschedulable", "")

    status = await llmkube(kc, "status", "first-high", "-n", ns)
    assert "Waiting for:" in status.out and "GPUs: nvidia.com/gpu: 2 (queue position" in status.out


def _ranked(admin: Any, ns: str) -> bool:
    high = status_of(admin, "InferenceService", "first-high", ns).get("queuePosition") or 0
    low = status_of(admin, "InferenceService", "later-normal", ns).get("queuePosition") or 0
    return 0 < high < low


async def test_scale_refuses_an_autoscaled_count_and_changes_bounds_stop_and_fixed_counts(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    admin = full_cluster.admin()
    for args in (["--name", "auto", "--max-replicas", "3"], ["--name", "fixed"]):
        run = await llmkube(kc, "deploy", SOURCE, "-n", ns, "--no-wait", *args)
        assert run.code == 0, run.text

    refused = await llmkube(kc, "scale", "auto", "2", "-n", ns)
    assert refused.code == 1
    assert refused.err.startswith(
        'error: "auto" is autoscaled: its HorizontalPodAutoscaler owns the replica count'
    )
    assert admin.get(API, "InferenceService", "auto", ns)["spec"].get("replicas", 1) == 1

    # `kubectl scale` goes through the scale subresource and is not refused: the service says who
    # owns the count (SpecValid and an IgnoredSetting event), and the HPA stays in charge.
    patch(admin, API, "InferenceService", "auto", ns, {"spec": {"replicas": 9}}, subresource="scale")

    def answered() -> tuple[str, str, str] | None:
        found = condition_triple(status_of(admin, "InferenceService", "auto", ns), "SpecValid")
        return found if found and found[0] == "False" else None

    spec_valid = await eventually(answered, what="SpecValid says the HPA owns the count")
    assert spec_valid[2].startswith("spec.replicas: 9 is outside the autoscaling bounds (1-3): the ")
    patch(admin, API, "InferenceService", "auto", ns, {"spec": {"replicas": 1}}, subresource="scale")

    bounds = await llmkube(kc, "scale", "auto", "--min", "2", "--max", "4", "-n", ns)
    assert (bounds.code, bounds.out.strip()) == (0, '"auto" autoscaling between 2 and 4')
    assert admin.get(API, "InferenceService", "auto", ns)["spec"]["autoscaling"] == {
        "minReplicas": 2,
        "maxReplicas": 4,
    }

    stopped = await llmkube(kc, "scale", "auto", "0", "-n", ns)
    assert stopped.out.strip() == '"auto" stopped (0 replicas)'
    await eventually(phase_is(admin, "InferenceService", "auto", ns, "Stopped"), what="auto stopped")

    scaled = await llmkube(kc, "scale", "fixed", "2", "-n", ns)
    assert scaled.out.strip() == '"fixed" scaled to 2 replicas'

    def two_ready() -> bool:
        status = status_of(admin, "InferenceService", "fixed", ns)
        return status.get("phase") == "Ready" and status.get("readyReplicas") == 2

    await eventually(two_ready, what="fixed Ready with 2 replicas")


async def test_dry_run_prints_objects_for_gitops_and_creates_nothing(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    run = await llmkube(
        kc, "deploy", SOURCE, "-n", ns, "--gpu", "1", "--context-size", "8192", "--dry-run", "-o", "yaml"
    )
    assert run.code == 0, run.text
    model, service = yaml.safe_load_all(run.out)
    assert (model["kind"], service["kind"]) == ("Model", "InferenceService")
    assert service["spec"] == {
        "modelRef": "tiny-chat",
        "resources": {"gpu": 1},
        "contextSize": 8192,
    }
    server = await llmkube(kc, "deploy", SOURCE, "-n", ns, "--dry-run=server")
    assert server.code == 0, server.text
    assert 'The API server accepts Model and InferenceService "tiny-chat"' in server.err
    assert full_cluster.admin().get_or_none(API, "Model", "tiny-chat", ns) is None
    assert full_cluster.admin().get_or_none(API, "InferenceService", "tiny-chat", ns) is None


async def test_mistakes_and_refusals_are_one_clear_line(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    missing = await llmkube(kc, "status", "nope", "-n", ns)
    assert (missing.code, missing.err.strip()) == (
        1,
        f'error: InferenceService "nope" in namespace "{ns}" not found',
    )
    bad = await llmkube(kc, "deploy", "model.gguf", "-n", ns)
    assert bad.code == 1 and bad.err.startswith('error: source "model.gguf" is not a URL')
    assert full_cluster.restricted_kubeconfig is not None
    denied = await llmkube(full_cluster.restricted_kubeconfig, "list", "-n", ns)
    assert denied.code == 1 and denied.err.startswith("error: not allowed:"), denied.text
    assert "Traceback" not in missing.err + bad.err + denied.err
    not_ready = await llmkube(kc, "deploy", SOURCE, "--name", "stopped", "-n", ns, "-r", "0", "--no-wait")
    assert not_ready.code == 0
    await eventually(
        phase_is(full_cluster.admin(), "InferenceService", "stopped", ns, "Stopped"), what="stopped"
    )
    chat = await llmkube(kc, "chat", "stopped", "hi", "-n", ns)
    assert (
        chat.code == 1 and 'no replica of "stopped" is ready to answer (phase Stopped, 0 pod(s))' in chat.err
    )


async def test_a_terminal_gets_colours_and_aligned_columns(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    deployed = await llmkube_in_terminal(kc, "deploy", SOURCE, "--name", "tty", "-n", ns, "--timeout", "90")
    assert deployed.code == 0, deployed.out
    assert '"tty" is Ready' in plain(deployed.out)
    listed = await llmkube_in_terminal(kc, "list", "-n", ns)
    assert "\x1b[32mReady" in listed.out, repr(listed.out)  # the phase is green on a terminal
    assert "\x1b[1mNAME" in listed.out  # bold headers
    row = row_of(listed.out, "tty")
    assert (row["PHASE"], row["REPLICAS"], row["QUEUE"]) == ("Ready", "1/1", "")
    piped = await llmkube(kc, "list", "-n", ns)
    assert "\x1b[" not in piped.out  # a pipe gets plain text
