"""hf:// Models against a Hub stand-in that speaks the Hub's file API (llmkube_testing/hfhub.py):
the controller sizes every listed file through the Hub's redirects (the sum is status.size),
reads the model file's GGUF header with Range requests on the storage host, records the staged
files, and fails a private repository's Model on the Hub's 401 (looked at again in 5 minutes); a Model that
names a Secret sends nothing (the controller reads no Secret) and says what it does not know."""

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from llmkube_testing.hfhub import HubState, running_hub
from modelsource_support import GGUFFactory, loopback_allowed

from llmkube.api.model import Model, ModelStatus
from llmkube.controllers.modelsource import ModelSourceIO, drive_model_plan
from llmkube.plan.model import ModelDecision, ModelFacts, ModelPlanConfig, Requeue
from llmkube.plan.model.size import format_size

T0 = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture
def hub() -> Iterator[HubState]:
    with running_hub() as state:
        yield state


@pytest.fixture
async def io() -> AsyncIterator[ModelSourceIO]:
    async with aiohttp.ClientSession() as session:
        yield ModelSourceIO(session=session, policy=loopback_allowed)


def hf_model(source: str, **spec: Any) -> Model:
    return Model.model_validate(
        {"metadata": {"name": "split", "namespace": "ml"}, "spec": {"source": source, **spec}}
    )


async def reconcile(
    model: Model, io: ModelSourceIO, config: ModelPlanConfig
) -> tuple[list[ModelStatus], ModelDecision]:
    writes: list[ModelStatus] = []

    async def write(current: Model, status: ModelStatus) -> Model:
        writes.append(status)
        return current.model_copy(update={"status": status})

    decision = await drive_model_plan(model, ModelFacts(), config, io, write, clock=lambda: T0)
    return writes, decision


def reasons(status: ModelStatus) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in status.conditions or ()}


async def test_a_sharded_hf_model_with_a_projector_is_sized_read_and_staged(
    hub: HubState, io: ModelSourceIO, make_gguf: GGUFFactory
) -> None:
    hub.lfs_threshold = 256  # every file here is an LFS file (the tiny GGUF is under 1 KiB)
    first = make_gguf("m-00001-of-00002.gguf", name="Split Llama").read_bytes()
    second = b"\x00" * 5000  # the second shard: only its size matters to the controller
    projector = b"mmproj" * 100
    hub.add(
        "org/split",
        {"m-00001-of-00002.gguf": first, "m-00002-of-00002.gguf": second, "mmproj.gguf": projector},
    )
    files = ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]
    model = hf_model("hf://org/split@main", files=files, mmproj="mmproj.gguf")

    writes, decision = await reconcile(model, io, ModelPlanConfig(hf_endpoint=hub.base))

    ready = writes[-1]
    assert ready.phase == "Ready"
    assert ready.staged_files == [*files, "mmproj.gguf"]
    assert ready.size == format_size(len(first) + len(second) + len(projector))
    assert ready.gguf is not None and ready.gguf.model_name == "Split Llama"
    assert decision.requeue == Requeue(after=timedelta(hours=1))
    # Every file went through the Hub's /resolve/ (a 302 to the storage host for the LFS ones);
    # the header was read from the storage host with Range requests, never as a whole file.
    resolved = {r.path for r in hub.requests if "/resolve/" in r.path}
    assert resolved == {f"/org/split/resolve/main/{name}" for name in [*files, "mmproj.gguf"]}
    ranged = [r for r in hub.requests if r.method == "GET" and r.path.startswith("/lfs/")]
    assert ranged and all(r.range is not None and r.range.startswith("bytes=") for r in ranged)


async def test_a_private_repository_without_a_token_fails_in_the_hubs_words(
    hub: HubState, io: ModelSourceIO, make_gguf: GGUFFactory
) -> None:
    hub.add("org/private", {"m.gguf": make_gguf("p.gguf").read_bytes()}, private=True)
    writes, decision = await reconcile(
        hf_model("hf://org/private", files=["m.gguf"]), io, ModelPlanConfig(hf_endpoint=hub.base)
    )
    failed = writes[-1]
    assert failed.phase == "Failed"
    assert reasons(failed)["Degraded"] == ("True", "SourceUnauthorized")
    message = next(c.message for c in failed.conditions or () if c.type == "Degraded")
    assert "401" in message and "spec.sourceSecretRef" in message
    assert decision.requeue == Requeue(after=timedelta(minutes=5))  # looked at again, no retry storm
    assert hub.requests and not any(r.authorized for r in hub.requests)


async def test_a_model_that_names_a_secret_sends_nothing_and_says_what_is_not_known(
    hub: HubState, io: ModelSourceIO, make_gguf: GGUFFactory
) -> None:
    hub.add("org/private", {"m.gguf": make_gguf("p.gguf").read_bytes()}, private=True)
    model = hf_model("hf://org/private", files=["m.gguf"], sourceSecretRef={"name": "hf-token"})
    writes, _ = await reconcile(model, io, ModelPlanConfig(hf_endpoint=hub.base))
    ready = writes[-1]
    assert ready.phase == "Ready" and ready.size is None and ready.gguf is None
    message = next(c.message for c in ready.conditions or () if c.type == "Available")
    assert 'Secret "hf-token"' in message
    assert hub.requests == []  # not one request without the credentials


async def test_a_wrong_revision_or_file_is_not_found(
    hub: HubState, io: ModelSourceIO, make_gguf: GGUFFactory
) -> None:
    hub.add("org/split", {"m.gguf": make_gguf("x.gguf").read_bytes()})
    for source, files in (("hf://org/split@v9", ["m.gguf"]), ("hf://org/split", ["absent.gguf"])):
        writes, _ = await reconcile(hf_model(source, files=files), io, ModelPlanConfig(hf_endpoint=hub.base))
        assert reasons(writes[-1])["Degraded"] == ("True", "SourceNotFound"), source


def test_the_stand_in_answers_like_the_hub(hub: HubState, tmp_path: Path) -> None:
    """What huggingface_hub reads: the revision API, and the 302 of an LFS file with its
    X-Linked-Etag (the SHA-256), X-Linked-Size and X-Repo-Commit."""
    import hashlib
    import json
    import urllib.request

    body = b"x" * 4096
    repo = hub.add("org/repo", {"big.gguf": body, "config.json": b"{}"})
    with urllib.request.urlopen(f"{hub.base}/api/models/org/repo/revision/main") as answer:
        document = json.load(answer)
    assert document["sha"] == repo.commit
    assert [s["rfilename"] for s in document["siblings"]] == ["big.gguf", "config.json"]

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(f"{hub.base}/org/repo/resolve/main/big.gguf", method="HEAD")
    with pytest.raises(urllib.error.HTTPError) as redirect:
        opener.open(request)
    headers = redirect.value.headers
    assert redirect.value.code == 302
    assert headers["X-Linked-Etag"] == f'"{hashlib.sha256(body).hexdigest()}"'
    assert headers["X-Linked-Size"] == "4096" and headers["X-Repo-Commit"] == repo.commit
    assert headers["Location"] == f"{hub.base}/lfs/{hashlib.sha256(body).hexdigest()}"
