"""Support for the model-source I/O tests: real GGUF files (written with gguf.GGUFWriter) and a
real HTTP server on 127.0.0.1 with the behaviours a model host can have."""

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np
from aiohttp import web
from aiohttp.test_utils import TestServer

from llmkube.plan.model.egress import EgressPolicy, parse_allowed_hosts

GGUFFactory = Callable[..., Path]

#: The test servers listen on 127.0.0.1, which the default egress policy refuses: the tests allow it
#: explicitly (as --model-source-allowed-hosts=127.0.0.1 would), never by weakening the default.
LOOPBACK = EgressPolicy(allowed=parse_allowed_hosts("127.0.0.1"))


def loopback_allowed() -> EgressPolicy:
    return LOOPBACK


def write_gguf(
    path: Path,
    *,
    name: str | None = "Tiny Llama",
    architecture: str = "llama",
    file_type: int = 15,
    context_length: int = 4096,
    license_text: str | None = "MIT",
    vocabulary: int = 0,
    token_length: int = 12,
    tensor_shape: tuple[int, int] = (8, 16),
) -> Path:
    """A small but genuine GGUF file: header key/values, an optional tokenizer-sized string array
    (to make the header large), and one float32 tensor (the bulk of the file)."""
    writer = gguf.GGUFWriter(str(path), architecture)
    if name is not None:
        writer.add_name(name)
    writer.add_file_type(file_type)
    writer.add_context_length(context_length)
    writer.add_embedding_length(tensor_shape[1])
    writer.add_block_count(2)
    writer.add_head_count(4)
    if license_text is not None:
        writer.add_license(license_text)
    if vocabulary:
        writer.add_array(
            "tokenizer.ggml.tokens", [f"token-{i:06d}".ljust(token_length, "~") for i in range(vocabulary)]
        )
    writer.add_tensor(
        "token_embd.weight", np.arange(np.prod(tensor_shape), dtype=np.float32).reshape(tensor_shape)
    )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass
class ModelHost:
    """The server's files and what it observed: every test asserts on real traffic."""

    files: dict[str, bytes] = field(default_factory=dict)
    range_requests: list[tuple[int, int]] = field(default_factory=list)
    body_bytes_sent: int = 0
    head_requests: int = 0
    stream_written: int = 0
    stream_finished: asyncio.Event = field(default_factory=asyncio.Event)
    stream_completed: bool = False
    server: TestServer | None = None

    def url(self, path: str) -> str:
        assert self.server is not None
        return str(self.server.make_url(path))

    def _file(self, request: web.Request) -> bytes:
        body = self.files.get(request.match_info["name"])
        if body is None:
            raise web.HTTPNotFound()
        return body

    async def ranged(self, request: web.Request) -> web.StreamResponse:
        """A well-behaved host: ETag, Content-Length, Accept-Ranges, single-range 206 answers."""
        body = self._file(request)
        etag = f'"{len(body):x}-{hash(body) & 0xFFFF:x}"'
        if request.method == "HEAD":
            self.head_requests += 1
            head = web.StreamResponse(headers={"ETag": etag, "Accept-Ranges": "bytes"})
            head.content_length = len(body)
            await head.prepare(request)
            return head
        match = _RANGE.match(request.headers.get("Range", ""))
        if match is None:
            self.body_bytes_sent += len(body)
            return web.Response(body=body, headers={"ETag": etag})
        start = int(match.group(1))
        end = min(int(match.group(2) or len(body) - 1), len(body) - 1)
        if start >= len(body):
            raise web.HTTPRequestRangeNotSatisfiable()
        self.range_requests.append((start, end))
        chunk = body[start : end + 1]
        self.body_bytes_sent += len(chunk)
        return web.Response(
            status=206,
            body=chunk,
            headers={"ETag": etag, "Content-Range": f"bytes {start}-{end}/{len(body)}"},
        )

    async def plain(self, request: web.Request) -> web.StreamResponse:
        """A host without Range support: always the whole body, streamed (here padded to 64 MiB)."""
        body = self._file(request)
        total = 64 * 1024 * 1024
        response = web.StreamResponse()
        response.content_length = total
        await response.prepare(request)
        try:
            padded = body + bytes(64 * 1024)
            sent = 0
            while sent < total:
                piece = padded[: min(len(padded), total - sent)]
                await response.write(piece)
                sent += len(piece)
                self.stream_written = sent
            self.stream_completed = True
        finally:
            self.stream_finished.set()
        return response

    async def changing(self, request: web.Request) -> web.StreamResponse:
        """Every HEAD sees a new version of the file."""
        self.head_requests += 1
        response = web.StreamResponse(headers={"ETag": f'"v{self.head_requests}"'})
        response.content_length = 4096
        await response.prepare(request)
        return response

    async def bare(self, request: web.Request) -> web.StreamResponse:
        return web.Response()  # 200 without ETag or Content-Length

    async def status(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=int(request.match_info["code"]))

    async def slow(self, request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(1.0)  # the slowness is the point; clients under test give up after 0.2 s
        return web.Response(headers={"ETag": '"late"'})

    async def short(self, request: web.Request) -> web.StreamResponse:
        """Announces a full range, sends half of it, hangs up: a Content-Length mismatch."""
        body = self._file(request)
        match = _RANGE.match(request.headers.get("Range", ""))
        assert match is not None
        start, end = int(match.group(1)), min(int(match.group(2)), len(body) - 1)
        response = web.StreamResponse(
            status=206, headers={"Content-Range": f"bytes {start}-{end}/{len(body)}"}
        )
        response.content_length = end - start + 1
        await response.prepare(request)
        await response.write(body[start : start + (end - start + 1) // 2])
        assert request.transport is not None
        request.transport.close()
        return response

    async def lying_total(self, request: web.Request) -> web.StreamResponse:
        """Announces a file of 10^30 bytes (the old reader raised OverflowError making it)."""
        body = self._file(request)
        match = _RANGE.match(request.headers.get("Range", ""))
        assert match is not None
        start, end = int(match.group(1)), min(int(match.group(2)), len(body) - 1)
        self.range_requests.append((start, end))
        return web.Response(
            status=206, body=body[start : end + 1], headers={"Content-Range": f"bytes {start}-{end}/{10**30}"}
        )

    async def generous(self, request: web.Request) -> web.StreamResponse:
        """Answers every range with the rest of the file, and says so: more than was asked."""
        body = self._file(request)
        match = _RANGE.match(request.headers.get("Range", ""))
        assert match is not None
        start = int(match.group(1))
        self.range_requests.append((start, len(body) - 1))
        return web.Response(
            status=206,
            body=body[start:],
            headers={"Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"},
        )

    async def no_total(self, request: web.Request) -> web.StreamResponse:
        body = self._file(request)
        chunk = body[:1024]
        return web.Response(status=206, body=chunk, headers={"Content-Range": f"bytes 0-{len(chunk) - 1}/*"})
