"""Hostile model sources against the real controller and API server: hostile headers, sources
the controller must not reach, hanging sources.

The sources are real HTTP servers on loopback that the tests own and count: one serves the
hostile GGUF headers of llmkube_testing.hostile_gguf and a Content-Range of 10^30 bytes; a bare
listener counts every connection made to it (the SSRF targets); another accepts and never
answers (hanging sources)."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from fault_support import API, eventually, in_process
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.hostile_gguf import HOSTILE, ordinary
from llmkube_testing.pytest_plugin import fresh_namespace
from llmkube_testing.rest import KubeRest

from llmkube.controllers.setup import ControllersConfig
from llmkube.kube.control import Controller
from llmkube.kube.types import ObjectKey
from llmkube.plan.model.bounds import MAX_GGUF_TEXT, TRUNCATION_MARKER
from llmkube.plan.model.decision import ModelPlanConfig
from llmkube.plan.model.egress import EgressConfig, parse_allowed_hosts

_RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")


def controllers(allowed: str, **config: Any) -> ControllersConfig:
    return ControllersConfig(
        model=ModelPlanConfig(),
        manage_priority_classes=False,
        model_egress=EgressConfig(allowed_hosts=parse_allowed_hosts(allowed)),
        **config,
    )


def model(name: str, source: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Model", "metadata": {"name": name}, "spec": {"source": source}}


def status(admin: KubeRest, name: str, namespace: str) -> dict[str, Any]:
    return admin.get(API, "Model", name, namespace).get("status") or {}


def degraded(found: dict[str, Any]) -> tuple[str, str]:
    for condition in found.get("conditions") or ():
        if condition["type"] == "Degraded":
            return condition["reason"], condition["message"]
    return "", ""


def counting(controller: Controller) -> Callable[[ObjectKey], int]:
    """Reconciles per key from now on (test instrumentation around the real reconcile)."""
    counts: Counter[ObjectKey] = Counter()
    inner = controller._reconcile

    async def counted(key: ObjectKey) -> Any:
        try:
            return await inner(key)
        finally:
            counts[key] += 1

    controller._reconcile = counted
    return lambda key: counts[key]


# -- the servers ------------------------------------------------------------------------------------


@dataclass
class FileHost:
    """Serves `files` with single byte ranges; `/lying/` announces every file as 10^30 bytes."""

    files: dict[str, bytes]
    requests: Counter[str] = field(default_factory=Counter)  # by path
    bytes_sent: Counter[str] = field(default_factory=Counter)
    base: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.requests[request.path] += 1
        body = self.files[name]
        match = _RANGE.match(request.headers.get("Range", ""))
        if request.method == "HEAD" or match is None:
            response = web.Response(
                body=b"" if request.method == "HEAD" else body, headers={"ETag": f'"{name}"'}
            )
            if request.method == "HEAD":
                response.headers["Content-Length"] = str(len(body))
            return response
        start, end = int(match.group(1)), min(int(match.group(2)), len(body) - 1)
        total = 10**30 if request.path.startswith("/lying/") else len(body)
        chunk = body[start : end + 1]
        self.bytes_sent[name] += len(chunk)
        return web.Response(
            status=206,
            body=chunk,
            headers={"ETag": f'"{name}"', "Content-Range": f"bytes {start}-{end}/{total}"},
        )


@dataclass
class Listener:
    """Counts connections. `answer`: a 200 with an ETag (a target that tells), else silence."""

    answer: bool = True
    connections: int = 0
    port: int = 0
    server: asyncio.Server | None = None
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if not self.answer:
            self.writers.append(writer)  # hangs: never a byte back
            return
        writer.write(b'HTTP/1.1 200 OK\r\nETag: "secret"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
        await writer.drain()
        writer.close()

    async def start(self) -> Listener:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@pytest.fixture
async def file_host() -> AsyncIterator[FileHost]:
    host = FileHost(files={"ordinary": ordinary(), **HOSTILE})
    app = web.Application()
    app.router.add_route("*", "/files/{name}", host.handle)
    app.router.add_route("*", "/lying/{name}", host.handle)
    app.router.add_route("*", "/to/{port}", redirect_to_port)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield host
    await runner.cleanup()


async def redirect_to_port(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound(f"http://127.0.0.1:{request.match_info['port']}/latest/meta-data/")


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    target = await Listener().start()
    yield target
    await target.stop()


@pytest.fixture
async def hanging() -> AsyncIterator[Listener]:
    target = await Listener(answer=False).start()
    yield target
    await target.stop()


@pytest.fixture
def other_namespace(fault_cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from fresh_namespace(fault_cluster, request)


# -- hostile headers --------------------------------------------------------------------------------

#: Model name -> (source path, phase, Degraded reason or None)
HOSTILE_MODELS = {
    **{name: (f"/files/{name}", "Failed", "InvalidModelFile") for name in HOSTILE},
    "name-2mib": ("/files/name-2mib", "Ready", None),
    "name-4mib": ("/files/name-4mib", "Ready", None),
    "context-length-max": ("/files/context-length-max", "Ready", None),
    "lying-total": ("/lying/ordinary", "Failed", "InvalidSourceResponse"),
    "ordinary": ("/files/ordinary", "Ready", None),
}


async def test_hostile_headers_get_a_status_once_and_are_never_fetched_again(
    fault_cluster: LocalCluster, fault_namespace: str, file_host: FileHost
) -> None:
    admin, ns = fault_cluster.admin(), fault_namespace
    config = controllers("127.0.0.1")
    async with in_process(fault_cluster.controller_kubeconfig, namespace=ns, controllers=config) as running:
        for name, (path, _, _) in HOSTILE_MODELS.items():
            admin.create(model(name, file_host.base + path), namespace=ns)

        def every_model_has_its_status() -> bool:
            return all(
                status(admin, name, ns).get("phase") == phase
                for name, (_, phase, _) in HOSTILE_MODELS.items()
            )

        await eventually(every_model_has_its_status, within=60, what="a status for every hostile Model")
        for name, (_, _phase, reason) in HOSTILE_MODELS.items():
            found = status(admin, name, ns)
            if reason is not None:
                why, message = degraded(found)
                assert why == reason, (name, found)
                assert message.startswith(f'"{file_host.base}') and "not read again" in message, message
                assert len(message) < 4096
            else:
                assert degraded(found) == ("", ""), (name, found)
        for name in ("name-2mib", "name-4mib"):
            gguf = status(admin, name, ns)["gguf"]
            assert gguf["modelName"].startswith("N" * MAX_GGUF_TEXT + TRUNCATION_MARKER)
            assert gguf["modelName"].endswith(" bytes]")
        assert "contextLength" not in status(admin, "context-length-max", ns)["gguf"]
        assert status(admin, "ordinary", ns)["gguf"]["modelName"] == "Tiny Llama"
        one_attempt = dict(file_host.requests)
        # Each file was read once: a HEAD and one growing prefix of Range reads.
        assert one_attempt["/files/kv-count-max"] == 2 and one_attempt["/files/ordinary"] == 2
        assert one_attempt["/lying/ordinary"] == 2
        assert file_host.bytes_sent["name-4mib"] <= len(HOSTILE["name-4mib"])

        # Reconcile every Model again, three times over (what backoff retries would do): nothing
        # is fetched again.
        models = running.controllers.models.controller
        reconciles = counting(models)
        keys = [ObjectKey(ns, name) for name in HOSTILE_MODELS]
        for round_ in range(1, 4):
            for key in keys:
                models.enqueue(key)
            await eventually(
                lambda r=round_: all(reconciles(key) >= r for key in keys), within=30, what="the reconciles"
            )
        assert dict(file_host.requests) == one_attempt
        assert not running.task.done()  # the controller stays up

    # A restarted controller plans from the stored statuses: still nothing fetched.
    async with in_process(fault_cluster.controller_kubeconfig, namespace=ns, controllers=config) as restarted:
        reconciles = counting(restarted.controllers.models.controller)
        for key in keys:
            restarted.controllers.models.controller.enqueue(key)
        await eventually(lambda: all(reconciles(key) >= 1 for key in keys), within=30, what="the reconciles")
        assert dict(file_host.requests) == one_attempt


# -- the controller fetches only what it may --------------------------------------------------------


async def test_sources_the_controller_must_not_reach_are_refused_without_a_connection(
    fault_cluster: LocalCluster, fault_namespace: str, file_host: FileHost, listener: Listener
) -> None:
    admin, ns = fault_cluster.admin(), fault_namespace
    allowed_port = int(file_host.base.rsplit(":", 1)[1])
    refused = {
        "loopback": f"http://127.0.0.1:{listener.port}/m.gguf",
        "by-name": f"http://localhost:{listener.port}/m.gguf",
        "mapped": f"http://[::ffff:127.0.0.1]:{listener.port}/m.gguf",
        "link-local": "http://169.254.169.254/latest/meta-data/",
        "redirect": f"{file_host.base}/to/{listener.port}",
    }
    # Only the file host's own port is allowed (--model-source-allowed-hosts=127.0.0.1:PORT).
    config = controllers(f"127.0.0.1:{allowed_port}")
    async with in_process(fault_cluster.controller_kubeconfig, namespace=ns, controllers=config):
        for name, source in refused.items():
            admin.create(model(name, source), namespace=ns)
        admin.create(model("allowed", f"{file_host.base}/files/ordinary"), namespace=ns)

        def settled() -> bool:
            return all(status(admin, name, ns).get("phase") == "Failed" for name in refused) and (
                status(admin, "allowed", ns).get("phase") == "Ready"
            )

        await eventually(settled, within=60, what="every refused Model Failed, the allowed one Ready")
        for name, source in refused.items():
            found = status(admin, name, ns)
            reason, message = degraded(found)
            assert reason == "SourceNotAllowed", (name, found)
            assert message.startswith(f'The controller does not fetch "{source}"'), message
            assert "sourceETag" not in found and "gguf" not in found  # nothing the target said
        assert "redirected to" in degraded(status(admin, "redirect", ns))[1]
        assert listener.connections == 0
        assert status(admin, "allowed", ns)["gguf"]["modelName"] == "Tiny Llama"


async def test_the_api_server_is_refused_even_where_loopback_is_allowed(
    fault_cluster: LocalCluster, fault_namespace: str, listener: Listener
) -> None:
    admin, ns = fault_cluster.admin(), fault_namespace
    config = controllers("127.0.0.0/8")  # every loopback address allowed...
    async with in_process(fault_cluster.controller_kubeconfig, namespace=ns, controllers=config):
        admin.create(model("apiserver", f"{fault_cluster.server}/version"), namespace=ns)
        admin.create(model("loopback", f"http://127.0.0.1:{listener.port}/m.gguf"), namespace=ns)
        await eventually(
            lambda: status(admin, "apiserver", ns).get("phase") == "Failed",
            within=60,
            what="apiserver Failed",
        )
        reason, message = degraded(status(admin, "apiserver", ns))
        assert reason == "SourceNotAllowed"
        assert f"127.0.0.1:{fault_cluster.api_port} is the Kubernetes API server" in message
        # ... and what the allowlist allows is fetched: the other loopback listener answered.
        await eventually(lambda: listener.connections > 0, within=30, what="the allowed listener fetched")


# -- fairness ---------------------------------------------------------------------------------------


async def test_hanging_sources_in_one_namespace_do_not_delay_another(
    fault_cluster: LocalCluster,
    fault_namespace: str,
    other_namespace: str,
    file_host: FileHost,
    hanging: Listener,
) -> None:
    """8 Models whose source accepts and never answers, with 4 Model workers (the default cap):
    a Model of another namespace is Ready as fast as without them."""
    admin = fault_cluster.admin()
    config = controllers("127.0.0.1", model_workers=4)
    async with in_process(fault_cluster.controller_kubeconfig, controllers=config):
        for index in range(8):
            admin.create(
                model(f"hangs-{index}", f"http://127.0.0.1:{hanging.port}/m{index}.gguf"),
                namespace=fault_namespace,
            )
        await eventually(lambda: hanging.connections >= 2, within=30, what="the hanging sources being read")
        started = time.monotonic()
        admin.create(model("elsewhere", f"{file_host.base}/files/ordinary"), namespace=other_namespace)
        await eventually(
            lambda: status(admin, "elsewhere", other_namespace).get("phase") == "Ready",
            within=60,
            what="the other namespace's Model Ready",
        )
        seconds = time.monotonic() - started
        print(f"\n[fairness] Ready in {seconds:.2f} s beside 8 hanging sources ({hanging.connections} held)")
        assert seconds < 5.0
        # The hanging namespace holds at most its share of the fetches at once.
        assert hanging.connections <= 4
