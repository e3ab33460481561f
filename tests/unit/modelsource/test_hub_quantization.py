"""A Model that names a Hugging Face repository and `spec.quantization` (no `spec.files`): the
controller lists the repository on a Hub stand-in that speaks the Hub's API (llmkube_testing/hfhub.py),
serves the file of that quantization (its shards, in order), remembers the choice in status so a
later reconcile asks the Hub nothing, and when the quantization is not there says which ones are.
The list is kept a while: two Models of one repository ask the Hub once; a refused Hub host is
refused by the egress policy before anything is sent."""

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from llmkube_testing.hfhub import HubState, running_hub
from modelsource_support import GGUFFactory, loopback_allowed

from llmkube.api.model import Model, ModelStatus
from llmkube.controllers.modelsource import ModelSourceIO, drive_model_plan
from llmkube.controllers.modelsource.hublisting import ListingCache
from llmkube.plan.model import ModelDecision, ModelFacts, ModelPlanConfig, Requeue
from llmkube.plan.model.events import model_events
from llmkube.plan.model.hub_resolution import with_resolved_files

T0 = datetime(2026, 5, 1, tzinfo=UTC)
REPO = "org/Tiny-Chat-GGUF"


@pytest.fixture
def hub() -> Iterator[HubState]:
    with running_hub() as state:
        yield state


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as http:
        yield http


@pytest.fixture
def io(session: aiohttp.ClientSession) -> ModelSourceIO:
    return ModelSourceIO(session=session, policy=loopback_allowed, listings=ListingCache())


@pytest.fixture
def repository(hub: HubState, make_gguf: GGUFFactory) -> dict[str, bytes]:
    files = {
        "README.md": b"# tiny\n",
        "tiny-chat-Q4_K_M.gguf": make_gguf("q4.gguf", name="Tiny Q4").read_bytes(),
        "tiny-chat-Q8_0.gguf": make_gguf("q8.gguf", name="Tiny Q8").read_bytes(),
        "mmproj-tiny-chat-f16.gguf": b"projector",
        "F16/tiny-chat-F16-00001-of-00002.gguf": make_gguf("f16.gguf", name="Tiny F16").read_bytes(),
        "F16/tiny-chat-F16-00002-of-00002.gguf": b"\x00" * 300,
    }
    hub.add(REPO, files)
    return files


def quantized(quantization: str, source: str = f"hf://{REPO}", **spec: Any) -> Model:
    return Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ml", "generation": 1},
            "spec": {"source": source, "quantization": quantization, **spec},
        }
    )


async def reconcile(
    model: Model, io: ModelSourceIO, config: ModelPlanConfig
) -> tuple[list[ModelStatus], ModelDecision, Model]:
    writes: list[ModelStatus] = []

    async def write(current: Model, status: ModelStatus) -> Model:
        writes.append(status)
        return current.model_copy(update={"status": status})

    stored = {"model": model}

    async def remember(current: Model, status: ModelStatus) -> Model:
        stored["model"] = await write(current, status)
        return stored["model"]

    decision = await drive_model_plan(model, ModelFacts(), config, io, remember, clock=lambda: T0)
    return writes, decision, stored["model"]


def condition(status: ModelStatus, type_: str) -> tuple[str, str, str]:
    found = next(c for c in status.conditions or () if c.type == type_)
    return found.status, found.reason, found.message


def listings(hub: HubState) -> list[str]:
    return [r.path for r in hub.requests if r.path.startswith("/api/models/")]


@pytest.mark.usefixtures("repository")
async def test_the_file_of_the_quantization_is_served_and_remembered(
    hub: HubState, io: ModelSourceIO
) -> None:
    config = ModelPlanConfig(hf_endpoint=hub.base)
    writes, decision, stored = await reconcile(quantized("q8_0"), io, config)

    ready = writes[-1]
    assert ready.phase == "Ready"
    assert ready.staged_files == ["tiny-chat-Q8_0.gguf"]
    assert ready.gguf is not None and ready.gguf.model_name == "Tiny Q8"
    assert decision.requeue == Requeue(after=timedelta(hours=1))
    # The choice was said (an Event a person sees in `kubectl describe`) before the file was read.
    chosen = [
        e for status in writes for e in model_events(None, status) if e.reason == "QuantizationResolved"
    ]
    assert chosen and '"tiny-chat-Q8_0.gguf"' in chosen[0].message and REPO in chosen[0].message
    assert listings(hub) == [f"/api/models/{REPO}/revision/main"]
    # What the InferenceService planner sees: the Model with the chosen file.
    assert with_resolved_files(stored).spec.files == ["tiny-chat-Q8_0.gguf"]

    # The next reconcile (a resync, a restart: no cache) takes the choice from status.
    hub.requests.clear()
    fresh = ModelSourceIO(session=io.session, policy=loopback_allowed, listings=ListingCache())
    _, again, _ = await reconcile(stored, fresh, config)
    assert again.status.staged_files == ["tiny-chat-Q8_0.gguf"]
    assert listings(hub) == []


@pytest.mark.usefixtures("repository")
async def test_a_sharded_quantization_serves_its_first_shard_and_stages_all(
    hub: HubState, io: ModelSourceIO
) -> None:
    writes, _, stored = await reconcile(
        quantized("F16", mmproj="mmproj-tiny-chat-f16.gguf"), io, ModelPlanConfig(hf_endpoint=hub.base)
    )
    assert writes[-1].phase == "Ready"
    assert writes[-1].staged_files == [
        "F16/tiny-chat-F16-00001-of-00002.gguf",
        "F16/tiny-chat-F16-00002-of-00002.gguf",
        "mmproj-tiny-chat-f16.gguf",
    ]
    assert with_resolved_files(stored).spec.files == [
        "F16/tiny-chat-F16-00001-of-00002.gguf",
        "F16/tiny-chat-F16-00002-of-00002.gguf",
    ]


@pytest.mark.usefixtures("repository")
async def test_a_quantization_the_repository_lacks_names_the_ones_it_has(
    hub: HubState, io: ModelSourceIO
) -> None:
    writes, decision, stored = await reconcile(quantized("Q5_K_M"), io, ModelPlanConfig(hf_endpoint=hub.base))
    failed = writes[-1]
    assert failed.phase == "Failed"
    status, reason, message = condition(failed, "Degraded")
    assert (status, reason) == ("True", "QuantizationNotFound")
    assert '"Q5_K_M"' in message and "F16, Q4_K_M, Q8_0" in message
    assert [e.reason for e in model_events(None, failed) if e.type == "Warning"] == ["QuantizationNotFound"]
    assert decision.requeue == Requeue(after=timedelta(minutes=5))  # the repository may gain it
    assert with_resolved_files(stored).spec.files is None


async def test_two_models_of_one_repository_ask_the_hub_once(
    hub: HubState, io: ModelSourceIO, repository: dict[str, bytes]
) -> None:
    config = ModelPlanConfig(hf_endpoint=hub.base)
    await reconcile(quantized("Q4_K_M"), io, config)
    await reconcile(quantized("Q5_K_M"), io, config)
    assert listings(hub) == [f"/api/models/{REPO}/revision/main"]


async def test_the_hub_says_no_in_its_own_terms(
    hub: HubState, io: ModelSourceIO, make_gguf: GGUFFactory
) -> None:
    hub.add("org/private-GGUF", {"m-Q4_K_M.gguf": make_gguf().read_bytes()}, private=True)
    hub.add("org/safetensors", {"model.safetensors": b"st"})
    config = ModelPlanConfig(hf_endpoint=hub.base)
    cases = {
        "hf://org/private-GGUF": "SourceUnauthorized",
        "hf://org/absent-GGUF": "SourceNotFound",
        "hf://org/private-GGUF@v9": "SourceUnauthorized",
        "hf://org/safetensors": "NoGGUFFile",
    }
    for source, expected in cases.items():
        writes, decision, _ = await reconcile(quantized("Q4_K_M", source), io, config)
        status, reason, message = condition(writes[-1], "Degraded")
        assert (status, reason) == ("True", expected), source
        assert "spec.quantization" in message, message
        assert decision.requeue == Requeue(after=timedelta(minutes=5))
    assert not any(r.authorized for r in hub.requests)  # no token: the controller reads no Secret


async def test_a_hub_the_egress_policy_refuses_is_not_asked(
    hub: HubState, session: aiohttp.ClientSession, repository: dict[str, bytes]
) -> None:
    strict = ModelSourceIO(session=session, listings=ListingCache())  # loopback refused, as by default
    writes, _, _ = await reconcile(quantized("Q4_K_M"), strict, ModelPlanConfig(hf_endpoint=hub.base))
    status, reason, message = condition(writes[-1], "Degraded")
    assert (status, reason) == ("True", "SourceNotAllowed")
    assert "loopback" in message
    assert hub.requests == []


async def test_another_format_is_left_to_the_runtime(hub: HubState, io: ModelSourceIO) -> None:
    writes, _, _ = await reconcile(
        quantized("awq", "hf://org/Tiny-AWQ", format="safetensors"), io, ModelPlanConfig(hf_endpoint=hub.base)
    )
    assert writes[-1].phase == "Ready"
    assert condition(writes[-1], "Available")[1] == "RuntimeResolved"
    assert hub.requests == []
