"""Fixtures for the model-source I/O tests (helpers live in modelsource_support)."""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from modelsource_support import GGUFFactory, ModelHost, write_gguf


@pytest.fixture
def make_gguf(tmp_path: Path) -> GGUFFactory:
    def factory(filename: str = "model.gguf", **options: Any) -> Path:
        return write_gguf(tmp_path / filename, **options)

    return factory


@pytest.fixture
async def model_host() -> AsyncIterator[ModelHost]:
    host = ModelHost()
    app = web.Application()
    app.router.add_get("/ranged/{name}", host.ranged)
    app.router.add_get("/plain/{name}", host.plain)
    app.router.add_route("HEAD", "/changing", host.changing)
    app.router.add_route("HEAD", "/bare", host.bare)
    app.router.add_get("/status/{code}", host.status)
    app.router.add_get("/slow", host.slow)
    app.router.add_get("/short/{name}", host.short)
    app.router.add_get("/no-total/{name}", host.no_total)
    app.router.add_get("/lying-total/{name}", host.lying_total)
    app.router.add_get("/generous/{name}", host.generous)
    server = TestServer(app, host="127.0.0.1")  # a random free port
    await server.start_server()
    host.server = server
    yield host
    await server.close()
