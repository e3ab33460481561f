"""The plan → act loop end to end: real files, a real HTTP server, an in-memory status store."""

import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from modelsource_support import GGUFFactory, ModelHost, loopback_allowed

from llmkube.api.model import Model, ModelStatus
from llmkube.controllers.modelsource import ModelSourceIO, PlanLoopError, drive_model_plan
from llmkube.plan.model import (
    ActionKind,
    CachedFile,
    FetchError,
    FetchFailure,
    ModelAction,
    ModelFacts,
    ModelPlanConfig,
    Requeue,
    StoredFile,
)
from llmkube.plan.model.size import format_size
from llmkube.plan.model.source import SourceKind, cache_key

T0 = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture
async def io(tmp_path: Path) -> AsyncIterator[ModelSourceIO]:
    async with aiohttp.ClientSession() as session:
        yield ModelSourceIO(session=session, local_roots=(str(tmp_path),), policy=loopback_allowed)


def local_config(tmp_path: Path, cache: Path) -> ModelPlanConfig:
    """Local sources allowed under the test's directory (--model-local-roots), cached in `cache`."""
    return ModelPlanConfig(cache_path=str(cache), local_source_roots=(str(tmp_path),))


def make_model(source: str, refresh: str = "IfNotPresent", **spec: Any) -> Model:
    return Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ml"},
            "spec": {"source": source, "refreshPolicy": refresh, **spec},
        }
    )


class StatusStore:
    """Stands in for the API server's status subresource: keeps what was written, in order."""

    def __init__(self) -> None:
        self.writes: list[ModelStatus] = []

    async def write(self, model: Model, status: ModelStatus) -> Model:
        self.writes.append(status)
        return model.model_copy(update={"status": status})


def file_bytes(path: str) -> bytes:
    return Path(path).read_bytes()


def conditions(status: ModelStatus) -> dict[str, tuple[str, str]]:
    """The reference's conditions; the summary ones (Ready, Reconciling, Stalled) are the planner's tests'."""
    summary = ("Ready", "Reconciling", "Stalled")
    return {c.type: (c.status, c.reason) for c in status.conditions or () if c.type not in summary}


async def reconcile(
    model: Model, io: ModelSourceIO, config: ModelPlanConfig, store: StatusStore, now: datetime
) -> tuple[Model, Any]:
    facts = ModelFacts(cached_file=await io.observe_cached_file(model, config), local_sources_allowed=True)
    written_before = len(store.writes)
    decision = await drive_model_plan(model, facts, config, io, store.write, clock=lambda: now)
    if len(store.writes) > written_before:
        model = model.model_copy(update={"status": store.writes[-1]})
    return model, decision


async def test_local_model_is_copied_once_then_served_from_cache(
    io: ModelSourceIO, make_gguf: GGUFFactory, tmp_path: Path
) -> None:
    source = make_gguf("src.gguf", name="Tiny Llama")
    config = local_config(tmp_path, tmp_path / "cache")
    store = StatusStore()
    model, decision = await reconcile(make_model(f"file://{source}"), io, config, store, T0)

    assert [s.phase for s in store.writes] == ["Copying", "Ready"]  # Copying is visible while copying
    ready = store.writes[-1]
    expected_path = tmp_path / "cache" / cache_key(f"file://{source}") / "Tiny-Llama.gguf"
    assert ready.path == str(expected_path)
    assert ready.sha256 == hashlib.sha256(source.read_bytes()).hexdigest()
    assert ready.gguf is not None and ready.gguf.quantization == "Q4_K_M"
    assert conditions(ready)["Available"] == ("True", "ModelReady")
    assert conditions(ready)["Progressing"] == ("False", "Superseded")
    assert decision.requeue == Requeue(after=timedelta(hours=1))

    # The next reconcile finds everything in place: no action, no write.
    model, again = await reconcile(model, io, config, store, T0 + timedelta(minutes=5))
    assert len(store.writes) == 2
    assert again.action.kind is ActionKind.NONE
    assert again.requeue == Requeue(after=timedelta(minutes=55))


async def test_on_change_refetches_a_grown_source(
    io: ModelSourceIO, make_gguf: GGUFFactory, tmp_path: Path
) -> None:
    source = make_gguf("src.gguf", name="Tiny Llama")
    config = local_config(tmp_path, tmp_path / "cache")
    store = StatusStore()
    model, _ = await reconcile(make_model(str(source), "OnChange"), io, config, store, T0)
    first_sha = store.writes[-1].sha256
    source.write_bytes(make_gguf("bigger.gguf", name="Tiny Llama", tensor_shape=(16, 16)).read_bytes())

    model, decision = await reconcile(model, io, config, store, T0 + timedelta(hours=2))
    assert [s.phase for s in store.writes[2:]] == ["Copying", "Ready"]
    assert conditions(store.writes[2])["SourceDrifted"] == ("True", "UpstreamChanged")
    refreshed = store.writes[-1]
    assert conditions(refreshed)["SourceDrifted"] == ("False", "InSync")
    assert refreshed.sha256 == hashlib.sha256(source.read_bytes()).hexdigest() != first_sha
    assert refreshed.source_content_length == source.stat().st_size
    assert file_bytes(refreshed.path or "") == file_bytes(str(source))
    assert decision.action.kind is ActionKind.NONE


async def test_missing_local_source_fails_without_hot_loop(io: ModelSourceIO, tmp_path: Path) -> None:
    config = local_config(tmp_path, tmp_path / "cache")
    store = StatusStore()
    _, decision = await reconcile(make_model(str(tmp_path / "nowhere" / "m.gguf")), io, config, store, T0)
    assert [s.phase for s in store.writes] == ["Copying", "Failed"]
    assert conditions(store.writes[-1])["Degraded"] == ("True", "CopyFailed")
    assert (decision.requeue, decision.error) == (Requeue(after=timedelta(minutes=5)), None)


async def test_http_model_is_ready_with_metadata_and_reports_drift(
    io: ModelSourceIO, model_host: ModelHost, make_gguf: GGUFFactory
) -> None:
    model_host.files["m.gguf"] = make_gguf(name="Remote Llama").read_bytes()
    store = StatusStore()
    model, _ = await reconcile(make_model(model_host.url("/ranged/m.gguf")), io, ModelPlanConfig(), store, T0)
    assert [s.phase for s in store.writes] == ["Ready"]  # one write: Ready, metadata and baseline together
    ready = store.writes[0]
    # No file of ours (the pods fetch it): no path; the size is the file's, from the same answers.
    assert (ready.path, ready.size) == (None, format_size(len(model_host.files["m.gguf"])))
    assert ready.gguf is not None and ready.gguf.model_name == "Remote Llama"
    assert ready.source_content_length == len(model_host.files["m.gguf"])
    assert conditions(ready) == {
        "SourceDrifted": ("False", "InSync"),
        "Available": ("True", "WorkloadResolved"),
    }

    model_host.files["m.gguf"] = make_gguf("v2.gguf", name="Remote Llama", tensor_shape=(32, 16)).read_bytes()
    _, later = await reconcile(model, io, ModelPlanConfig(), store, T0 + timedelta(hours=1))
    assert conditions(store.writes[-1])["SourceDrifted"] == ("True", "UpstreamChanged")
    assert store.writes[-1].phase == "Ready"
    assert later.requeue == Requeue(after=timedelta(hours=1))


async def test_perform_each_action(
    io: ModelSourceIO, model_host: ModelHost, make_gguf: GGUFFactory, tmp_path: Path
) -> None:
    source = make_gguf("src.gguf", name="Tiny")
    model_dir = tmp_path / "cache" / "k"
    copy = ModelAction(
        kind=ActionKind.COPY_LOCAL, source=str(source), model_dir=str(model_dir), model_name="m"
    )
    copied = (await io.perform(copy, ModelFacts())).copy
    assert isinstance(copied, StoredFile) and copied.path == str(model_dir / "Tiny.gguf")

    stale = model_dir / "old.gguf"
    stale.write_bytes(b"stale")
    refetch = ModelAction(
        kind=ActionKind.REFETCH, source=str(source), model_dir=str(model_dir), model_name="m"
    )
    facts = await io.perform(refetch, ModelFacts(cached_file=CachedFile(path=str(stale), size=5)))
    assert facts.cached_file is None and isinstance(facts.copy, StoredFile)
    assert sorted(p.name for p in model_dir.iterdir()) == ["Tiny.gguf"]  # the stale file went first

    verify = ModelAction(kind=ActionKind.VERIFY, cached_path=str(model_dir / "Tiny.gguf"), model_name="m")
    verified = (await io.perform(verify, ModelFacts())).verify
    assert isinstance(verified, StoredFile) and verified.sha256 == copied.sha256

    local_probe = ModelAction(
        kind=ActionKind.PROBE_FINGERPRINT, source_kind=SourceKind.LOCAL, source=str(source)
    )
    probed = (await io.perform(local_probe, ModelFacts())).probe
    assert probed is not None and probed.fingerprint is not None
    assert probed.fingerprint.content_length == source.stat().st_size

    model_host.files["m.gguf"] = source.read_bytes()
    url = model_host.url("/ranged/m.gguf")
    head_only = ModelAction(kind=ActionKind.PROBE_FINGERPRINT, source_kind=SourceKind.HTTP, source=url)
    facts = await io.perform(head_only, ModelFacts())
    assert facts.probe is not None and facts.remote_header is None
    assert model_host.range_requests == []
    with_header = ModelAction(
        kind=ActionKind.PROBE_FINGERPRINT, source_kind=SourceKind.HTTP, source=url, read_header=True
    )
    facts = await io.perform(with_header, ModelFacts())
    assert facts.probe is not None and facts.remote_header is not None
    assert facts.remote_header.metadata is not None and facts.remote_header.metadata.model_name == "Tiny"

    assert await io.perform(ModelAction(), facts) == facts


async def test_refetch_clears_only_model_files_before_copying(io: ModelSourceIO, tmp_path: Path) -> None:
    # A directory that happens to be named *.gguf is not a model file and is left alone.
    model_dir = tmp_path / "k"
    (model_dir / "stuck.gguf").mkdir(parents=True)
    (model_dir / "stuck.gguf" / "inner").write_text("x")
    real = model_dir / "real.gguf"
    real.write_text("x")
    refetch = ModelAction(
        kind=ActionKind.REFETCH, source=str(tmp_path / "nowhere"), model_dir=str(model_dir), model_name="m"
    )
    facts = await io.perform(refetch, ModelFacts())
    assert isinstance(facts.copy, FetchError)
    assert facts.copy.kind is FetchFailure.NOT_FOUND  # the copy of the missing source, after clearing
    assert not real.exists()
    assert (model_dir / "stuck.gguf" / "inner").exists()


async def test_observe_only_looks_at_controller_cached_models(
    io: ModelSourceIO, make_gguf: GGUFFactory, tmp_path: Path
) -> None:
    config = ModelPlanConfig(cache_path=str(tmp_path))
    source = "/data/m.gguf"
    directory = tmp_path / cache_key(source)
    directory.mkdir()
    (directory / "tiny.gguf").write_bytes(b"12345")
    assert await io.observe_cached_file(make_model(source), config) == CachedFile(
        path=str(directory / "tiny.gguf"), size=5
    )
    metal = make_model(source, hardware={"accelerator": "metal"})
    assert await io.observe_cached_file(metal, config) is None
    assert await io.observe_cached_file(make_model("https://h/m.gguf"), config) is None


class ForgetfulIO:
    """An executor that never reports results: the loop guard must stop it, not spin."""

    def __init__(self) -> None:
        self.calls = 0

    async def perform(self, action: ModelAction, facts: ModelFacts) -> ModelFacts:
        self.calls += 1
        return facts


async def test_the_loop_guard_stops_an_executor_that_reports_nothing(tmp_path: Path) -> None:
    store = StatusStore()
    forgetful = ForgetfulIO()
    with pytest.raises(PlanLoopError):
        await drive_model_plan(
            make_model("/data/m.gguf"),
            ModelFacts(local_sources_allowed=True),
            ModelPlanConfig(cache_path=str(tmp_path), local_source_roots=("/data",)),
            forgetful,
            store.write,
        )
    assert forgetful.calls == 5
    assert [s.phase for s in store.writes] == ["Copying"]  # written once: later plans change nothing
