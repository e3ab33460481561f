"""Local sources are confined to --model-local-roots: the lexical rule and what
the planner makes of it."""

from datetime import UTC, datetime, timedelta

import pytest

from llmkube.api.model import Model, ModelStatus
from llmkube.plan.model import (
    ActionKind,
    FetchError,
    FetchFailure,
    ModelFacts,
    ModelPlanConfig,
    Requeue,
    StoredFile,
    plan_model,
)
from llmkube.plan.model.local_roots import InvalidLocalRoot, local_source_violation, normalized_roots
from llmkube.plan.model.source import local_path

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DISABLED = "local model sources are disabled"
OUTSIDE = "it is outside the directories the controller may read local models from"
NOT_CLEAN = 'a local model source must be an absolute path without "." or ".." elements'


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ((), ()),
        (("",), ()),
        (("/data/models/",), ("/data/models",)),
        ((" /data ", "/data", "/data/./"), ("/data",)),
        (("/",), ("/",)),
        (("//",), ("/",)),
        (("/a//b",), ("/a/b",)),
    ],
)
def test_roots_are_normalized(raw: tuple[str, ...], normalized: tuple[str, ...]) -> None:
    assert normalized_roots(raw) == normalized


def test_a_relative_root_is_refused() -> None:
    with pytest.raises(InvalidLocalRoot, match="'models' is not an absolute path"):
        normalized_roots(["models"])


@pytest.mark.parametrize(
    ("source", "roots", "refused_because"),
    [
        ("/data/m.gguf", (), DISABLED),
        ("file:///data/m.gguf", (), DISABLED),
        ("/data/m.gguf", ("/data",), None),
        ("file:///data/m.gguf", ("/data",), None),
        ("/data/sub/dir/m.gguf", ("/data",), None),
        ("/data//m.gguf", ("/data",), None),  # an empty element is harmless
        ("/other/m.gguf", ("/data", "/other"), None),
        ("/anything/at/all", ("/",), None),
        ("/var/run/secrets/kubernetes.io/serviceaccount/token", ("/data",), OUTSIDE),
        ("file:///etc/shadow", ("/data",), OUTSIDE),
        ("/data2/m.gguf", ("/data",), OUTSIDE),  # a sibling that shares the prefix
        ("/data", ("/data",), None),  # the root itself: the copy refuses a directory
        ("/data/../etc/passwd", ("/data",), NOT_CLEAN),
        ("/data/sub/../m.gguf", ("/data",), NOT_CLEAN),  # stays inside, still refused: one rule
        ("/data/./m.gguf", ("/data",), NOT_CLEAN),
        ("file://data/m.gguf", ("/data",), NOT_CLEAN),  # file://<host>/... is not a local path
        ("/data/..", ("/",), NOT_CLEAN),
    ],
)
def test_the_rule(source: str, roots: tuple[str, ...], refused_because: str | None) -> None:
    message = local_source_violation(source, local_path(source), roots)
    if refused_because is None:
        assert message is None
        return
    assert message is not None and refused_because in message
    assert message.startswith(f'spec.source "{source}" ')
    assert "--model-local-roots" in message
    assert all(root in message for root in roots)


def model(source: str, *, accelerator: str | None = None, status: dict[str, object] | None = None) -> Model:
    spec: dict[str, object] = {"source": source}
    if accelerator:
        spec["hardware"] = {"accelerator": accelerator}
    return Model.model_validate(
        {"metadata": {"name": "m", "namespace": "ml", "generation": 2}, "spec": spec, "status": status}
    )


def conditions_of(status: ModelStatus) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in status.conditions or ()}


@pytest.mark.parametrize(
    ("source", "roots"),
    [
        ("file:///var/run/secrets/kubernetes.io/serviceaccount/token", ()),
        ("/var/run/secrets/kubernetes.io/serviceaccount/token", ("/data",)),
        ("/data/../var/run/secrets/kubernetes.io/serviceaccount/token", ("/data",)),
    ],
)
def test_the_planner_fails_the_model_without_reading_anything(source: str, roots: tuple[str, ...]) -> None:
    decision = plan_model(
        model(source), ModelFacts(local_sources_allowed=True), NOW, ModelPlanConfig(local_source_roots=roots)
    )
    assert decision.action.kind is ActionKind.NONE  # no copy, no probe, no verify
    assert decision.status.phase == "Failed"
    status, reason, message = conditions_of(decision.status)["Degraded"]
    assert (status, reason) == ("True", "InvalidSource")
    assert message == local_source_violation(source, local_path(source), roots)
    assert decision.requeue == Requeue()  # no retry loop: a spec edit brings it back


def test_a_ready_copy_stops_being_served_once_its_root_is_withdrawn() -> None:
    allowed = ModelPlanConfig(local_source_roots=("/data",))
    copying = plan_model(model("/data/m.gguf"), ModelFacts(local_sources_allowed=True), NOW, allowed)
    stored = StoredFile(path="/models/k/m.gguf", size=10, sha256="ab" * 32, gguf=None, source_size=10)
    copying_model = model("/data/m.gguf", status=copying.status.model_dump(by_alias=True))
    ready = plan_model(copying_model, ModelFacts(local_sources_allowed=True, copy=stored), NOW, allowed)
    assert ready.status.phase == "Ready"

    withdrawn = plan_model(
        model("/data/m.gguf", status=ready.status.model_dump(by_alias=True)),
        ModelFacts(local_sources_allowed=True),
        NOW + timedelta(minutes=1),
        ModelPlanConfig(local_source_roots=("/elsewhere",)),
    )
    assert withdrawn.status.phase == "Failed"
    assert withdrawn.status.path is None and withdrawn.status.sha256 is None  # nothing describes a file
    assert conditions_of(withdrawn.status)["Degraded"][1] == "InvalidSource"


def test_a_link_out_of_the_roots_found_by_the_copy_is_an_invalid_source_retried_slowly() -> None:
    config = ModelPlanConfig(local_source_roots=("/data",))
    copying = plan_model(model("/data/link.gguf"), ModelFacts(local_sources_allowed=True), NOW, config)
    assert copying.action.kind is ActionKind.COPY_LOCAL
    escaped = FetchError(FetchFailure.ESCAPES_ROOTS, "local model source ... is not allowed: ...")
    decision = plan_model(
        model("/data/link.gguf", status=copying.status.model_dump(by_alias=True)),
        ModelFacts(local_sources_allowed=True, copy=escaped),
        NOW,
        config,
    )
    assert decision.status.phase == "Failed"
    assert conditions_of(decision.status)["Degraded"] == ("True", "InvalidSource", escaped.message)
    assert decision.requeue == Requeue(after=timedelta(minutes=5))  # the disk may change; never a hot loop


def test_metal_models_are_not_confined_the_host_agent_reads_them() -> None:
    decision = plan_model(
        model("/Users/me/m.gguf", accelerator="metal"),
        ModelFacts(local_sources_allowed=True),
        NOW,
        ModelPlanConfig(),
    )
    assert decision.status.phase == "Ready"
    assert decision.action.kind is ActionKind.NONE


def test_a_namespace_without_the_admins_label_may_not_use_local_sources() -> None:
    """Inside the roots, but in a namespace the admin did not allow: nothing is read, nothing retried."""
    refused = plan_model(
        model("/data/m.gguf"), ModelFacts(), NOW, ModelPlanConfig(local_source_roots=("/data",))
    )
    assert refused.status.phase == "Failed" and refused.action.kind is ActionKind.NONE
    assert refused.requeue.after is None and not refused.requeue.backoff
    degraded = next(c for c in refused.status.conditions or () if c.type == "Degraded")
    assert degraded.reason == "InvalidSource"
    assert degraded.message == (
        "local model sources are not allowed in namespace 'ml': an admin allows them with the namespace "
        "label inference.llmkube.dev/local-model-sources=allowed"
    )
