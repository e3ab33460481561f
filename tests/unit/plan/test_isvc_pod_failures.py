"""Scheduled pods that cannot run: from the kubelet's container statuses to phase, conditions and
message (what the node tier shows for real in tests/node/test_node_failures.py)."""

from typing import Any

import pytest
from isvc_factories import live_deployment, observe, pod
from isvc_planning import condition, plan

from llmkube.plan.inferenceservice.pod_failures import PodFailure, diagnose_pod_failure, last_line


def waiting(name: str, reason: str, message: str = "", last: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"name": name, "state": {"waiting": {"reason": reason}}, "restartCount": 4}
    if message:
        status["state"]["waiting"]["message"] = message
    if last:
        status["lastState"] = {"terminated": last}
    return status


def exited(code: int, reason: str = "Error", log: str = "") -> dict[str, Any]:
    return {"exitCode": code, "reason": reason, **({"message": log} if log else {})}


def terminated(name: str, how: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "state": {"terminated": how}, "restartCount": 0}


def running(name: str) -> dict[str, Any]:
    return {"name": name, "state": {"running": {"startedAt": "2026-03-01T11:00:00Z"}}, "ready": False}


def failing_pod(
    name: str = "demo-1",
    *,
    init: list[dict[str, Any]] | None = None,
    main: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    document = pod(name, "Pending" if init else "Running")
    if init is not None:
        document["status"]["initContainerStatuses"] = init
    if main is not None:
        document["status"]["containerStatuses"] = main
    return document


NEVER_PULL = 'Container image "localhost/nope:1" is not present with pull policy of Never'
CURL_404 = "Downloading http://10.0.0.7/m.gguf\ncurl: (22) The requested URL returned error: 404\n"
LLAMA_CRASH = "build: 0 (unknown)\nerror: invalid argument: --no-such-flag\n\n"
CRASHING = "keeps failing (CrashLoopBackOff)"
DOWNLOAD_404 = (
    "init container model-downloader failed: exit code 22: curl: (22) The requested URL returned error: 404"
)
BACKOFF = "CrashLoopBackOff"

CASES = {
    "never-pull": (
        failing_pod(main=[waiting("llama-server", "ErrImageNeverPull", NEVER_PULL)]),
        PodFailure("ErrImageNeverPull", f"container llama-server: ErrImageNeverPull: {NEVER_PULL}"),
    ),
    "pull-backoff": (
        failing_pod(main=[waiting("app", "ImagePullBackOff", 'Back-off pulling image "x"')]),
        PodFailure("ImagePullBackOff", 'container app: ImagePullBackOff: Back-off pulling image "x"'),
    ),
    "config": (
        failing_pod(main=[waiting("app", "CreateContainerConfigError", 'secret "hf" not found')]),
        PodFailure(
            "CreateContainerConfigError", 'container app: CreateContainerConfigError: secret "hf" not found'
        ),
    ),
    "crash-last-line": (
        failing_pod(main=[waiting("llama-server", BACKOFF, "back-off 40s", exited(1, log=LLAMA_CRASH))]),
        PodFailure(
            BACKOFF,
            f"container llama-server {CRASHING}: exit code 1: error: invalid argument: --no-such-flag",
        ),
    ),
    "oom": (
        failing_pod(main=[waiting("vllm", BACKOFF, last=exited(137, "OOMKilled"))]),
        PodFailure(BACKOFF, f"container vllm {CRASHING}: exit code 137 (OOMKilled)"),
    ),
    # The kubelet shows a failed init container as terminated, then backing off, then retrying:
    # one failure, one message (seen on the node tier: tests/node/test_node_failures.py).
    "download-404": (
        failing_pod(init=[terminated("model-downloader", exited(22, log=CURL_404))]),
        PodFailure("ModelDownloadFailed", DOWNLOAD_404),
    ),
    "download-404-backing-off": (
        failing_pod(init=[waiting("model-downloader", BACKOFF, last=exited(22, log=CURL_404))]),
        PodFailure("ModelDownloadFailed", DOWNLOAD_404),
    ),
    "download-404-retrying": (
        failing_pod(
            init=[{**running("model-downloader"), "lastState": {"terminated": exited(22, log=CURL_404)}}]
        ),
        PodFailure("ModelDownloadFailed", DOWNLOAD_404),
    ),
    "crash-between-attempts": (
        failing_pod(
            main=[{**running("llama-server"), "restartCount": 3, "lastState": {"terminated": exited(1)}}]
        ),
        PodFailure(BACKOFF, f"container llama-server {CRASHING}: exit code 1"),
    ),
    "init-image": (
        failing_pod(init=[waiting("model-downloader", "ErrImageNeverPull", NEVER_PULL)]),
        PodFailure("ErrImageNeverPull", f"init container model-downloader: ErrImageNeverPull: {NEVER_PULL}"),
    ),
    "other-init": (
        failing_pod(init=[waiting("prep", BACKOFF, last=exited(2))]),
        PodFailure("InitContainerFailed", "init container prep failed: exit code 2"),
    ),
}


@pytest.mark.parametrize(("pod_", "expected"), CASES.values(), ids=CASES.keys())
def test_the_kubelets_reason_and_the_real_cause(pod_: dict[str, Any], expected: PodFailure) -> None:
    assert diagnose_pod_failure([pod_]) == expected


TERMINATING = failing_pod("old", main=[waiting("llama-server", BACKOFF)])
TERMINATING["metadata"]["deletionTimestamp"] = "2026-03-01T11:59:00Z"
NOT_STUCK = {
    "none": [],
    "pending": [pod("p", "Pending")],  # not started yet
    "loading": [failing_pod(main=[running("llama-server")])],  # loading the model, not ready yet
    "creating": [failing_pod(main=[waiting("llama-server", "ContainerCreating")])],
    "pod-initializing": [failing_pod(init=[waiting("model-downloader", "PodInitializing")])],
    "downloading": [
        failing_pod(init=[running("model-downloader")], main=[waiting("llama-server", "PodInitializing")])
    ],
    # One crash is not a loop: the kubelet restarts at once and the container runs again.
    "one-crash": [
        failing_pod(
            main=[{**running("llama-server"), "restartCount": 1, "lastState": {"terminated": exited(1)}}]
        )
    ],
    # Crashed before, serving now.
    "recovered": [
        failing_pod(
            main=[
                {
                    **running("llama-server"),
                    "ready": True,
                    "restartCount": 5,
                    "lastState": {"terminated": exited(1)},
                }
            ]
        )
    ],
    # The download failed once and then worked: the pod goes on.
    "download-retried-ok": [
        failing_pod(
            init=[{**terminated("model-downloader", exited(0)), "lastState": {"terminated": exited(22)}}],
            main=[running("llama-server")],
        )
    ],
    "terminating": [TERMINATING],
}


@pytest.mark.parametrize("pods", NOT_STUCK.values(), ids=NOT_STUCK.keys())
def test_nothing_stuck_is_no_failure(pods: list[dict[str, Any]]) -> None:
    assert diagnose_pod_failure(pods) is None


def test_init_containers_explain_first_and_pods_by_name() -> None:
    crash = waiting("llama-server", BACKOFF, last=exited(1))
    download = waiting("model-downloader", BACKOFF, last=exited(22))
    pods = [failing_pod("b", main=[crash]), failing_pod("a", init=[download], main=[crash])]
    assert diagnose_pod_failure(pods) == diagnose_pod_failure([pods[1]])
    failure = diagnose_pod_failure(pods)
    assert failure is not None and failure.reason == "ModelDownloadFailed"


def test_message_is_stable_across_retries() -> None:
    """Restart counts and back-off delays change on every retry; the status must not."""
    first = waiting("llama-server", BACKOFF, "back-off 10s", exited(1, log=LLAMA_CRASH))
    later = waiting("llama-server", BACKOFF, "back-off 5m0s", exited(1, log=LLAMA_CRASH))
    later["restartCount"] = 9
    assert diagnose_pod_failure([failing_pod(main=[first])]) == diagnose_pod_failure(
        [failing_pod(main=[later])]
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", ""), ("\n \n", ""), ("a\nb\n\n", "b"), ("x" * 400, "x" * 297 + "...")],
)
def test_last_line(text: str, expected: str) -> None:
    assert last_line(text) == expected


def test_a_failing_pod_makes_the_service_failed_and_degraded() -> None:
    crash = waiting("llama-server", BACKOFF, last=exited(1, log=LLAMA_CRASH))
    result = plan(observed=observe(deployment=live_deployment(ready=0), pods=[failing_pod(main=[crash])]))
    message = f"container llama-server {CRASHING}: exit code 1: error: invalid argument: --no-such-flag"
    assert result.status.phase == "Failed"
    assert condition(result, "Available") == ("False", "CrashLoopBackOff", message)
    assert condition(result, "Degraded") == ("True", "CrashLoopBackOff", message)
    assert condition(result, "Progressing") == ("False", "CrashLoopBackOff", message)
    assert result.deployment is not None  # the workload stays: fixing the spec rolls it forward


def test_a_ready_replica_outweighs_a_failing_one() -> None:
    crash = waiting("llama-server", BACKOFF, last=exited(1))
    result = plan(
        observed=observe(deployment=live_deployment(ready=1), pods=[failing_pod("new", main=[crash])])
    )
    assert result.status.phase == "Ready"
    assert condition(result, "Degraded") is None


def test_recovery_clears_the_failure() -> None:
    crash = waiting("llama-server", BACKOFF, last=exited(1))
    failed = plan(observed=observe(deployment=live_deployment(ready=0), pods=[failing_pod(main=[crash])]))
    healthy = plan(
        isvc=None,
        observed=observe(
            deployment=live_deployment(ready=1), pods=[failing_pod(main=[running("llama-server")])]
        ),
    )
    assert failed.status.phase == "Failed"
    assert healthy.status.phase == "Ready"
    assert condition(healthy, "Degraded") is None


def test_unschedulable_pods_are_explained_by_scheduling_first() -> None:
    pending = pod("p", "Pending", unschedulable="0/1 nodes are available: 1 Insufficient memory.")
    result = plan(observed=observe(deployment=live_deployment(ready=0), pods=[pending]))
    assert result.status.phase == "Creating"
    assert result.status.scheduling_status == "InsufficientResources"


REFUSAL = (
    'pods "demo-6b7c9d8f5-" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true '
    '(pod or container "server" must set securityContext.runAsNonRoot=true)'
)


def refused_deployment(**condition: str) -> dict[str, Any]:
    live = live_deployment(ready=0)
    live["status"]["conditions"] = [
        {
            "type": "ReplicaFailure",
            "status": "True",
            "reason": "FailedCreate",
            "message": REFUSAL,
            **condition,
        }
    ]
    return live


def test_pods_refused_at_creation_fail_the_service_with_the_servers_message_and_an_event() -> None:
    """No pod exists to diagnose: the Deployment's ReplicaFailure condition says why (any admission
    plugin: Pod Security, a ResourceQuota, a policy engine)."""
    result = plan(observed=observe(deployment=refused_deployment()))
    assert result.status.phase == "Failed"
    degraded = condition(result, "Degraded")
    assert degraded == ("True", "FailedCreate", f"the pods of this service cannot be created: {REFUSAL}")
    assert [(e.type, e.reason) for e in result.events] == [("Warning", "FailedCreate")]
    assert result.deployment is not None  # still applied: a fixed namespace or quota lets it recover


def test_a_replica_failure_that_cleared_is_not_reported() -> None:
    result = plan(observed=observe(deployment=refused_deployment(status="False")))
    assert result.status.phase == "Creating" and result.events == ()
