"""An s3:// Model read with the pods' web identity (spec.webIdentity): the controller has none of
its keys, so it sends nothing (not even an anonymous probe, which the bucket would refuse and fail
the Model on), and says what it therefore does not know; the Model is Ready for the downloader."""

import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import aiohttp
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from llmkube.api.model import Model, ModelStatus
from llmkube.controllers.modelsource import ModelSourceIO, drive_model_plan
from llmkube.plan.model import ModelFacts, ModelPlanConfig

ROLE = "arn:aws:iam::123456789012:role/models-reader"


class Recording(AbstractResolver):
    def __init__(self) -> None:
        self.lookups: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        raise OSError(socket.EAI_NONAME, "no lookups in this test")

    async def close(self) -> None:
        pass


@pytest.fixture
async def resolver() -> AsyncIterator[Recording]:
    yield Recording()


async def test_nothing_is_sent_and_status_says_whose_keys_sign(resolver: Recording) -> None:
    model = Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ml"},
            "spec": {"source": "s3://models/tiny.gguf", "webIdentity": {"roleArn": ROLE}},
        }
    )
    writes: list[ModelStatus] = []

    async def write(current: Model, status: ModelStatus) -> Model:
        writes.append(status)
        return current.model_copy(update={"status": status})

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=resolver)) as session:
        io = ModelSourceIO(session=session)
        await drive_model_plan(
            model, ModelFacts(), ModelPlanConfig(), io, write, clock=lambda: datetime(2026, 5, 1, tzinfo=UTC)
        )
    ready = writes[-1]
    assert ready.phase == "Ready" and ready.size is None and ready.gguf is None
    message = next(c.message for c in ready.conditions or () if c.type == "Available")
    assert f'web identity (role "{ROLE}") signs the requests' in message
    assert resolver.lookups == []
