"""The tests' model file server: byte ranges and ETags as the Model controller and the
model-downloader init container use them (the node tier serves the tiny model with it)."""

import http.client
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from llmkube_testing.fileserver import ModelFileHandler, _parse_range
from llmkube_testing.tiny_gguf import write_tiny_gguf

from llmkube.controllers.modelsource import read_remote_gguf_metadata
from llmkube.plan.model.egress import EgressPolicy, parse_allowed_hosts


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, bytes]]:
    data = write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    handler = type("Handler", (ModelFileHandler,), {"directory": tmp_path})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], data
    server.shutdown()
    server.server_close()


def fetch(
    port: int, path: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, headers=headers or {})
    return connection.getresponse()


def test_whole_file_range_and_etag(served: tuple[int, bytes]) -> None:
    port, data = served
    whole = fetch(port, "/tiny.gguf")
    assert (whole.status, whole.read()) == (200, data)
    etag = whole.getheader("ETag")
    part = fetch(port, "/tiny.gguf", {"Range": "bytes=4-9"})
    assert part.status == 206
    assert part.getheader("Content-Range") == f"bytes 4-9/{len(data)}"
    assert part.read() == data[4:10]
    assert fetch(port, "/tiny.gguf", {"If-None-Match": str(etag)}).status == 304
    head = fetch(port, "/tiny.gguf", method="HEAD")
    assert (head.status, head.getheader("Content-Length"), head.read()) == (200, str(len(data)), b"")


@pytest.mark.parametrize("path", ["/missing.gguf", "/../etc/passwd", "/"])
def test_missing_and_outside_paths_are_404(served: tuple[int, bytes], path: str) -> None:
    assert fetch(served[0], path).status == 404


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        ("bytes=0-99", 50, (0, 49)),
        ("bytes=10-", 50, (10, 49)),
        ("bytes=-5", 50, (45, 49)),
        ("bytes=50-60", 50, None),
        ("bytes=-", 50, None),
        ("items=0-1", 50, None),
        ("bytes=0-1,4-5", 50, None),
    ],
)
def test_range_parsing(header: str, size: int, expected: tuple[int, int] | None) -> None:
    assert _parse_range(header, size) == expected


async def test_the_controller_reads_the_header_through_ranges(served: tuple[int, bytes]) -> None:
    port, data = served
    async with aiohttp.ClientSession() as session:
        # The test server is on loopback, which the controller refuses unless allowed.
        loopback = EgressPolicy(allowed=parse_allowed_hosts("127.0.0.1"))
        header = await read_remote_gguf_metadata(
            session, f"http://127.0.0.1:{port}/tiny.gguf", policy=lambda: loopback
        )
    assert header.failure is None, header.detail
    assert header.metadata is not None and header.metadata.architecture == "llama"
    assert 0 < header.bytes_fetched <= len(data)
