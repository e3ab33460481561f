"""A property over random sequences of Model edits under a running service: whatever a tenant does to
`spec.source` (a local path inside or outside the allowed roots, another claim, an http URL, a
HuggingFace id, and back), and whenever the Model controller gets to it, no Deployment the planner
produces ever mounts a path, or reads a claim, that a Ready status of the Model's *current* spec has
not vouched for, and no host path outside the admin's roots or namespace allowance ever leaves the
planner.

Between two Model-controller passes the service is planned from the cache as the controller sees it
right after the edit: the new spec next to the old status (the window the issue's exploit used)."""

import asyncio
import posixpath
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from isvc_factories import make_isvc, observe

from llmkube.api.model import Model, ModelStatus
from llmkube.controllers.modelsource import drive_model_plan
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.current_model import describes_current_spec
from llmkube.plan.inferenceservice.planner import plan_inference_service
from llmkube.plan.model.decision import ActionKind, ModelAction, ModelPlanConfig
from llmkube.plan.model.facts import Fingerprint, ModelFacts, ProbeOutcome, RemoteHeader, StoredFile
from llmkube.plan.model.source import SourceKind, classify_source, local_path, parse_pvc_source
from llmkube.plan.tenancy import LOCAL_SOURCES_LABEL, TenancyPolicy, namespace_policy

ROOTS = ("/data/models",)
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SOURCES = [
    "https://models.example/a.gguf",
    "https://models.example/b.gguf",
    "/data/models/tiny.gguf",
    "file:///data/models/other.gguf",
    "/etc/shadow",
    "/data/models/../../etc/kubernetes/pki/ca.key",
    "/var/lib/kubelet/pki/kubelet-client-current.pem",
    "pvc://weights/tiny.gguf",
    "pvc://someone-elses-claim/secret.gguf",
    "Org/Repo-GGUF",
]


class SucceedingIO:
    """The Model controller's I/O, where every copy, verification and probe succeeds."""

    async def perform(self, action: ModelAction, facts: ModelFacts) -> ModelFacts:
        if action.kind in (ActionKind.COPY_LOCAL, ActionKind.REFETCH):
            path = posixpath.join(action.model_dir, "tiny.gguf")
            return replace(
                facts, copy=StoredFile(path=path, size=1024, sha256="0" * 64, gguf=None, source_size=1024)
            )
        if action.kind is ActionKind.VERIFY:
            return replace(
                facts, verify=StoredFile(path=action.cached_path, size=1024, sha256="0" * 64, gguf=None)
            )
        if action.kind is ActionKind.PROBE_FINGERPRINT:
            probe = ProbeOutcome(fingerprint=Fingerprint(etag='"e"', content_length=1024))
            return replace(facts, probe=probe, remote_header=RemoteHeader() if action.read_header else None)
        raise AssertionError(f"unexpected action {action.kind}")


def model_controller_pass(model: Model, local_allowed: bool) -> Model:
    """What the Model controller writes for the model as it is now (the whole plan -> act loop)."""
    statuses: list[ModelStatus] = []

    async def write(current: Model, status: ModelStatus) -> Model:
        statuses.append(status)
        return current.model_copy(update={"status": status})

    facts = ModelFacts(pvc_phase="Bound", local_sources_allowed=local_allowed)
    config = ModelPlanConfig(cache_path="/models", local_source_roots=ROOTS)
    asyncio.run(drive_model_plan(model, facts, config, SucceedingIO(), write, clock=lambda: NOW))
    return model.model_copy(update={"status": statuses[-1]}) if statuses else model


def edited(model: Model, source: str) -> Model:
    generation = (model.metadata.generation or 0) + 1
    return model.model_copy(
        update={
            "spec": model.spec.model_copy(update={"source": source}),
            "metadata": model.metadata.model_copy(update={"generation": generation}),
        }
    )


def volumes(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    return list(deployment["spec"]["template"]["spec"].get("volumes") or [])


# Each step: edit the source, or let the Model controller run.
STEPS = st.lists(st.one_of(st.sampled_from(SOURCES), st.just("<model controller>")), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(first=st.sampled_from(SOURCES), steps=STEPS, local_allowed=st.booleans())
def test_no_deployment_ever_uses_what_a_current_ready_status_did_not_vouch_for(
    first: str, steps: list[str], local_allowed: bool
) -> None:
    labels = {LOCAL_SOURCES_LABEL: "allowed"} if local_allowed else {}
    ns = namespace_policy({"metadata": {"name": "ai", "labels": labels}})
    config = OperatorConfig(tenancy=TenancyPolicy(local_source_roots=ROOTS))
    model = Model.model_validate(
        {"metadata": {"name": "tiny", "namespace": "ai", "generation": 1}, "spec": {"source": first}}
    )
    model = model_controller_pass(model, local_allowed)
    isvc = make_isvc({"modelRef": "tiny"})
    for step in steps:
        if step == "<model controller>":
            model = model_controller_pass(model, local_allowed)
        else:
            model = edited(model, step)
        result = plan_inference_service(isvc, model, replace(observe(), namespace=ns), config)
        if result.deployment is None:
            continue
        # Planned only from a Ready status of this very spec.
        assert model.status is not None and model.status.phase == "Ready"
        assert describes_current_spec(model)
        source = model.spec.source
        kind = classify_source(source)
        for volume in volumes(result.deployment):
            if "hostPath" in volume:
                assert kind is SourceKind.LOCAL and local_allowed
                path = volume["hostPath"]["path"]
                assert path == local_path(source)
                assert path.startswith("/data/models/") and ".." not in path.split("/")
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if volume.get("name") == "model-source":
                pvc = parse_pvc_source(source)
                assert kind is SourceKind.PVC and pvc is not None and claim == pvc.claim
        init = result.deployment["spec"]["template"]["spec"].get("initContainers") or []
        for container in init:
            env = {e["name"]: e.get("value") for e in container.get("env") or []}
            assert env.get("MODEL_SOURCE") == source
