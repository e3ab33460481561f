"""Failures made visible on a real node: each InferenceService that cannot run ends in phase Failed
with the kubelet's reason and a message naming the real cause, and the controller does not spin."""

import time
from typing import Any

from conftest import ModelSource
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import KubeRest
from llmkube_testing.tiny_service import tiny_llamacpp
from node_support import (
    API,
    CONTROLLER_SELECTOR,
    controller_metrics,
    controller_pods,
    metric_samples,
    wait_for,
)

MISSING_IMAGE = "localhost/llmkube-missing:1"
#: Services that never serve need little CPU: four of the tiny default (500m) fill the node's two cores
SMALL = {"resources": {"cpu": "100m", "memory": "256Mi"}}


def status(admin: KubeRest, name: str, namespace: str) -> dict[str, Any]:
    return admin.get(API, "InferenceService", name, namespace).get("status") or {}


def condition(state: dict[str, Any], type_: str) -> tuple[str, str, str] | None:
    for c in state.get("conditions") or ():
        if c["type"] == type_:
            return c["status"], c["reason"], c["message"]
    return None


def reconciles(node: NodeCluster) -> float:
    total = 0.0
    for pod in controller_pods(node.admin()):
        for labels, value in metric_samples(
            controller_metrics(node, pod), "controller_runtime_reconcile_total"
        ):
            if labels.get("controller") == "inferenceservice":
                total += value
    return total


def test_each_failure_names_its_real_cause_without_a_hot_loop(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, node_namespace: str
) -> None:
    admin, ns = node_cluster.admin(), node_namespace
    url = model_source.url()
    cases = {
        # Not on the node, and no registry to pull from (InferenceService has no pull policy: the
        # kubelet tries, fails, and backs off).
        "missing-image": (
            tiny_llamacpp(ns, "missing-image", url, image=MISSING_IMAGE, **SMALL),
            ("ErrImagePull", "ImagePullBackOff"),
            [MISSING_IMAGE],
        ),
        # llama-server rejects the flag and exits: its last words land in the status.
        "bad-args": (
            tiny_llamacpp(ns, "bad-args", url, extraArgs=["--no-such-flag"], **SMALL),
            ("CrashLoopBackOff",),
            ["exit code 1", "--no-such-flag"],
        ),
        # A Secret the spec names does not exist: the kubelet never starts the container, and says
        # which one (the controller has no right to Secrets: it reports what the kubelet found).
        "missing-secret": (
            tiny_llamacpp(
                ns,
                "missing-secret",
                url,
                env=[
                    {
                        "name": "HF_TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": "no-such-secret", "key": "t"}},
                    }
                ],
                **SMALL,
            ),
            ("CreateContainerConfigError",),
            ['"no-such-secret" not found'],
        ),
    }
    for objects, _, _ in cases.values():
        for obj in objects:
            admin.apply(obj)
    # The URL answers 404: the controller's own look at every file of the source finds it missing, so
    # the Model fails with the server's answer before any pod is made, and the service waits for it.
    for obj in tiny_llamacpp(ns, "download-404", model_source.url("missing.gguf"), **SMALL):
        admin.apply(obj)

    for name, (_, reasons, words) in cases.items():
        last: dict[str, Any] = {}

        def failed(
            name: str = name, reasons: tuple[str, ...] = reasons, last: dict[str, Any] = last
        ) -> dict[str, Any] | None:
            state = status(admin, name, ns)
            last["status"] = state
            available = condition(state, "Available")
            return state if state.get("phase") == "Failed" and available and available[1] in reasons else None

        try:
            state = wait_for(failed, within=180, what=f"{name}: Failed with {reasons}")
        except TimeoutError as err:  # say where it stood, and what its pods said
            pods = admin.list("v1", "Pod", ns, label_selector=f"app={name}")
            logs = node_cluster.kubectl_run(
                "logs", "-n", controller, "-l", CONTROLLER_SELECTOR, "--tail=80", "--prefix"
            )
            raise AssertionError(
                {"status": last.get("status"), "pods": [p.get("status") for p in pods], "controller": logs}
            ) from err
        _, reason, message = condition(state, "Degraded") or ("", "", "")
        print(f"{name}: phase {state['phase']}, Degraded {reason}: {message}")
        assert reason in reasons, state
        for word in words:
            assert word in message, (name, message)
        assert condition(state, "Available")[:2] == ("False", reason)  # type: ignore[index]

    def model_failed() -> dict[str, Any] | None:
        model = admin.get(API, "Model", "download-404", ns).get("status") or {}
        return model if model.get("phase") == "Failed" else None

    model = wait_for(model_failed, within=120, what="the 404 Model Failed")
    assert "404" in " ".join(c.get("message", "") for c in model.get("conditions") or ()), model
    assert status(admin, "download-404", ns).get("phase") == "Pending"
    assert not admin.list("v1", "Pod", ns, label_selector="app=download-404")

    # No hot loop: the kubelet retries with a growing back-off, and so do the status writes.
    versions: dict[str, set[str]] = {name: set() for name in [*cases, "download-404"]}
    before = reconciles(node_cluster)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for name in cases:
            versions[name].add(admin.get(API, "InferenceService", name, ns)["metadata"]["resourceVersion"])
        time.sleep(0.5)
    assert all(len(seen) <= 4 for seen in versions.values()), {n: len(v) for n, v in versions.items()}
    assert reconciles(node_cluster) - before <= 30
