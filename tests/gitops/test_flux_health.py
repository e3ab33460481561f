"""What Flux makes of the statuses the controller writes, computed by Flux's own code: kstatus
(github.com/fluxcd/cli-utils, the rules of a plain `wait: true` health check) and the CEL
evaluator of `healthCheckExprs` (github.com/fluxcd/pkg/runtime/cel) running the expressions of
manifests/gitops/flux/llmkube.yaml. Both through hack/tools/gitops-health.go (hack/build-tools.sh).

The statuses come from the planner itself (llmkube.plan), not written by hand."""

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from tools import ROOT, run, tool

from llmkube.api.model import Model
from llmkube.plan.inferenceservice.rollout import Rollout
from llmkube.plan.inferenceservice.scheduling import SchedulingInfo
from llmkube.plan.inferenceservice.status import StatusFacts, build_status
from llmkube.plan.model import ModelFacts, plan_model

FLUX = ROOT / "manifests" / "gitops" / "flux" / "llmkube.yaml"
API = "inference.llmkube.dev/v1alpha1"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def isvc_status(phase: str, *, generation: int = 2, **facts: Any) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "ready": 0,
        "desired": 1,
        "running": 0,
        "endpoint": "",
        "model_ready": True,
        "effective_priority": 0,
    }
    status = build_status(
        None, StatusFacts(phase=phase, **{**defaults, **facts}), generation=generation, now=NOW
    )  # type: ignore[arg-type]
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")


def isvc(name: str, status: dict[str, Any] | None, generation: int = 2) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": "team", "generation": generation},
        "spec": {"modelRef": "m"},
    }
    if status is not None:
        obj["status"] = status
    return obj


def model(name: str, pvc_phase: str | None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": name, "namespace": "team", "generation": 2},
        "spec": {"source": "pvc://models/llama.gguf"},
    }
    decision = plan_model(Model.model_validate(obj), ModelFacts(pvc_phase=pvc_phase), NOW)
    obj["status"] = decision.status.model_dump(by_alias=True, exclude_none=True, mode="json")
    return obj


SERVING = Rollout(observed=True, updated=1, total=1)
GPU_WAIT = SchedulingInfo("InsufficientGPU", "0/1 nodes: 1 Insufficient nvidia.com/gpu.", "nvidia.com/gpu: 1")

# (object, kstatus as Flux computes it, healthCheckExprs as Flux evaluates them)
CASES: list[tuple[dict[str, Any], str, str]] = [
    (isvc("ready", isvc_status("Ready", ready=1, running=1, rollout=SERVING)), "Current", "Current"),
    (
        isvc(
            "rolling-out",
            isvc_status("Ready", ready=1, running=2, rollout=Rollout(observed=True, updated=0, total=2)),
        ),
        "InProgress",
        "InProgress",
    ),
    (
        isvc("partly-ready", isvc_status("Progressing", ready=1, desired=2, rollout=SERVING)),
        "InProgress",
        "InProgress",
    ),
    (isvc("creating", isvc_status("Creating")), "InProgress", "InProgress"),
    (isvc("waiting-for-gpu", isvc_status("WaitingForGPU", scheduling=GPU_WAIT)), "InProgress", "InProgress"),
    (isvc("waiting-for-model", isvc_status("Pending")), "InProgress", "InProgress"),
    (isvc("stopped", isvc_status("Stopped", desired=0)), "Current", "Current"),
    (
        isvc("failed", isvc_status("Failed", failure_reason="InvalidSpec", failure_message="bad memory")),
        "Failed",
        "Failed",
    ),
    # A status written for generation 1 while the spec is at 2: kstatus cannot tell (no
    # status.observedGeneration in the API), the expressions read the Ready condition's.
    (
        isvc("stale", isvc_status("Ready", generation=1, ready=1, running=1, rollout=SERVING), generation=2),
        "Current",
        "InProgress",
    ),
    # Before the controller's first status: kstatus sees no condition at all (Current); the
    # expressions cannot be evaluated, which Flux reads as Unknown and keeps waiting.
    (isvc("no-status", None), "Current", "Unknown"),
    (model("model-ready", "Bound"), "Current", "Current"),
    (model("model-pending", "Pending"), "InProgress", "InProgress"),
    (model("model-failed", None), "Failed", "Failed"),
]


@pytest.fixture(scope="module")
def flux_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    objects = tmp_path_factory.mktemp("flux") / "objects.json"
    objects.write_text(json.dumps([case[0] for case in CASES]))
    output = run(tool("gitops-health"), "--kustomization", FLUX, objects)
    return {line["name"]: line for line in map(json.loads, output.splitlines())}


@pytest.mark.parametrize(
    ("obj", "kstatus", "cel"), CASES, ids=[case[0]["metadata"]["name"] for case in CASES]
)
def test_flux_reads_the_status(
    obj: dict[str, Any], kstatus: str, cel: str, flux_results: dict[str, dict[str, str]]
) -> None:
    found = flux_results[obj["metadata"]["name"]]
    assert (found["kstatus"], found["cel"]) == (kstatus, cel), found


def test_the_example_checks_both_kinds_and_waits() -> None:
    documents = list(yaml.safe_load_all(Path(FLUX).read_text()))
    (apps,) = [d for d in documents if d["kind"] == "Kustomization" and d["metadata"]["name"] == "inference"]
    assert apps["spec"]["wait"] is True
    assert {(e["apiVersion"], e["kind"]) for e in apps["spec"]["healthCheckExprs"]} == {
        (API, "InferenceService"),
        (API, "Model"),
    }
