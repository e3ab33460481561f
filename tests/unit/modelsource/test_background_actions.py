"""Model actions in the background, against a real HTTP server: a reconcile starts one and ends;
its result comes back as a fact, the Model is queued again, and one namespace's hanging sources
take only that namespace's slots."""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from modelsource_support import LOOPBACK, GGUFFactory

from llmkube.controllers.modelsource import ModelSourceIO
from llmkube.controllers.modelsource.background import BackgroundActions, SlotPools
from llmkube.kube.control import FairSlots
from llmkube.kube.types import ObjectKey
from llmkube.plan.model import ActionKind, HeaderFailure, ModelAction, ModelFacts, ProbeFailure
from llmkube.plan.model.decision import ActionTarget
from llmkube.plan.model.source import SourceKind


@dataclass
class Host:
    """`/hang` never answers until `release` is set; `/m.gguf` is a small real GGUF."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    #: set when a request reaches `/hang`
    hanging: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[str] = field(default_factory=list)
    body: bytes = b""
    server: TestServer | None = None

    async def hang(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.path)
        self.hanging.set()
        await self.release.wait()
        return web.Response(headers={"ETag": '"late"'})

    async def model(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.path)
        return web.Response(body=self.body, headers={"ETag": '"m"'})

    def url(self, path: str) -> str:
        assert self.server is not None
        return str(self.server.make_url(path))


@pytest.fixture
async def host(tmp_path: object, make_gguf: GGUFFactory) -> AsyncIterator[Host]:
    served = Host(body=make_gguf(name="Background").read_bytes())
    app = web.Application()
    app.router.add_route("*", "/hang/{n}", served.hang)
    app.router.add_route("*", "/m.gguf", served.model)
    served.server = TestServer(app, host="127.0.0.1")
    await served.server.start_server()
    yield served
    served.release.set()
    await served.server.close()


@dataclass
class Running:
    actions: BackgroundActions
    requeued: list[ObjectKey]
    woken: asyncio.Event


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    requeued: list[ObjectKey] = []
    woken = asyncio.Event()
    async with aiohttp.ClientSession() as session:
        io = ModelSourceIO(session=session, policy=lambda: LOOPBACK)

        async def perform(key: ObjectKey, action: ModelAction, facts: ModelFacts) -> ModelFacts | None:
            return await io.perform(action, facts)

        def requeue(key: ObjectKey) -> None:
            requeued.append(key)
            woken.set()

        actions = BackgroundActions(
            perform, requeue, SlotPools(network=FairSlots(16, 2), disk=FairSlots(2, 1))
        )
        yield Running(actions, requeued, woken)
        await actions.close()


def probe(url: str) -> ModelAction:
    return ModelAction(
        kind=ActionKind.PROBE_FINGERPRINT, source_kind=SourceKind.HTTP, source=url, target=ActionTarget(url)
    )


async def test_a_result_comes_back_as_facts_and_queues_the_model(running: Running, host: Host) -> None:
    key = ObjectKey("ml", "m")
    action = probe(host.url("/m.gguf"))
    running.actions.start(key, action)
    facts, token = running.actions.facts_for(key, ModelFacts())
    assert (facts.pending, token) == (action, None)
    await asyncio.wait_for(running.woken.wait(), 5)
    assert running.requeued == [key]
    facts, token = running.actions.facts_for(key, ModelFacts())
    assert facts.pending is None and token is not None
    assert facts.probe is not None and facts.probe.fingerprint is not None
    assert facts.probe.fingerprint.etag == '"m"'
    assert facts.results_for == ActionTarget(host.url("/m.gguf"))
    running.actions.consumed(key, token + 1)  # another reconcile's token: kept
    assert running.actions.facts_for(key, ModelFacts())[1] == token
    running.actions.consumed(key, token)
    assert running.actions.facts_for(key, ModelFacts()) == (ModelFacts(), None)
    assert host.requests == ["/m.gguf"]


async def test_the_same_action_is_not_started_twice_and_another_replaces_it(
    running: Running, host: Host
) -> None:
    key = ObjectKey("ml", "m")
    hanging = probe(host.url("/hang/1"))
    running.actions.start(key, hanging)
    running.actions.start(key, hanging)
    await asyncio.sleep(0.2)
    assert host.requests == ["/hang/1"]
    replacement = probe(host.url("/m.gguf"))
    running.actions.start(key, replacement)
    await asyncio.wait_for(running.woken.wait(), 5)
    facts, _ = running.actions.facts_for(key, ModelFacts())
    assert facts.results_for == ActionTarget(host.url("/m.gguf"))  # the first one's result never came
    assert running.requeued == [key]


async def test_a_forgotten_model_s_action_is_stopped(running: Running, host: Host) -> None:
    key = ObjectKey("ml", "gone")
    running.actions.start(key, probe(host.url("/hang/1")))
    await asyncio.wait_for(host.hanging.wait(), 5)  # the probe reached the server and hangs there
    (task,) = [t for t in asyncio.all_tasks() if t.get_name().startswith("model-action:ml/gone:")]
    running.actions.forget(key)
    host.release.set()
    # The action's task has ended, so whatever it would have done it has done: only then does
    # "no requeue, nothing kept" mean something.
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 5)
    assert task.cancelled()
    assert running.requeued == [] and len(running.actions) == 0


async def test_a_failing_helper_is_a_failed_result_not_a_lost_model(host: Host) -> None:
    requeued: list[ObjectKey] = []

    async def broken(key: ObjectKey, action: ModelAction, facts: ModelFacts) -> ModelFacts | None:
        raise RuntimeError("a bug in an I/O helper")

    actions = BackgroundActions(broken, requeued.append, SlotPools.sized(2))
    key = ObjectKey("ml", "m")
    action = probe(host.url("/m.gguf"))
    actions.start(key, ModelAction(**{**action.__dict__, "read_header": True}))
    for _ in range(50):
        if requeued:
            break
        await asyncio.sleep(0.02)
    facts, _ = actions.facts_for(key, ModelFacts())
    assert facts.probe is not None and facts.probe.failure is ProbeFailure.IO_ERROR
    assert facts.remote_header is not None and facts.remote_header.failure is HeaderFailure.IO_ERROR
    assert "a bug in an I/O helper" in facts.probe.detail


async def test_one_namespace_s_hanging_sources_do_not_delay_another(running: Running, host: Host) -> None:
    for index in range(8):
        running.actions.start(ObjectKey("busy", f"m{index}"), probe(host.url(f"/hang/{index}")))
    await asyncio.sleep(0.2)
    assert len(host.requests) == 2  # the busy namespace's two slots, no more
    running.actions.start(ObjectKey("quiet", "m"), probe(host.url("/m.gguf")))
    await asyncio.wait_for(running.woken.wait(), 5)
    # done while every one of the busy namespace's sources still hangs
    assert running.requeued == [ObjectKey("quiet", "m")]
    assert not host.release.is_set() and len(host.requests) == 3
