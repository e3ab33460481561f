"""The router's connections to backends (llmkube.router.http.client), against loopback servers that
write exact bytes: the three ways an answer is framed, streaming to a sink, keep-alive and what ends
it, a kept-alive connection the backend closed, connections that cannot be made or break, a
backend that goes silent, TLS, and headers that would split a request."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from llmkube_testing.pki import generate_pki

from llmkube.router.http.client import (
    AnswerBroken,
    AnswerSilent,
    ConnectFailed,
    ConnectionBroken,
    InvalidHeader,
    Origin,
    Pool,
)

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


@dataclass
class Backend:
    port: int
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)


async def _request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await reader.readexactly(length)


@contextlib.asynccontextmanager
async def backend(script: Script, *, tls: ssl.SSLContext | None = None) -> AsyncIterator[Backend]:
    """A server running `script(reader, writer, n)` on its n-th connection (from 1)."""
    state: Backend

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await script(reader, writer, state.connections)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    state = Backend(server.sockets[0].getsockname()[1])
    try:
        yield state
    finally:
        server.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


def _pool(**options: float) -> Pool:
    return Pool(keepalive=options.pop("keepalive", 4.0), read_timeout=options.pop("read_timeout", 5.0))


def _origin(port: int, scheme: str = "http", host: str = "127.0.0.1") -> Origin:
    return Origin(scheme, host, port)


STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


@dataclass
class Collected:
    chunks: list[bytes] = field(default_factory=list)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    error: AnswerBroken | None = None
    flushes: int = 0

    def body(self, data: bytes) -> None:
        self.chunks.append(data)

    def flush(self) -> None:
        self.flushes += 1

    def end(self) -> None:
        self.ended.set()

    def failed(self, error: AnswerBroken) -> None:
        self.error = error
        self.ended.set()


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", b"hello", id="content-length"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + _chunk(b"hel")
            + _chunk(b"lo")
            + b"0\r\n\r\n",
            b"hello",
            id="chunked",
        ),
        pytest.param(b"HTTP/1.0 200 OK\r\n\r\nhello", b"hello", id="until-close"),
        pytest.param(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"hello",
            id="after-100-continue",
        ),
    ],
)
async def test_an_answer_is_read_whole_however_it_is_framed(answer: bytes, body: bytes) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)
        writer.write(answer)
        await writer.drain()

    pool = _pool()
    async with backend(script) as server:
        got = await pool.send(_origin(server.port), "POST", "/v1/x", [("X-A", "1")], b"{}")
        assert got.status == 200 and got.reason == "OK"
        assert await got.read() == body
        got.close()
    await pool.close()


async def test_the_request_goes_out_as_given_with_host_and_length() -> None:
    seen: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        seen.append(await _request(reader))
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()

    pool = _pool()
    async with backend(script) as server:
        got = await pool.send(_origin(server.port), "POST", "/v1/chat?x=1", [("X-Id", "abc")], b'{"a":1}')
        assert got.status == 204 and await got.read() == b""
        got.close()
    await pool.close()
    assert seen == [
        b'POST /v1/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Id: abc\r\nContent-Length: 7\r\n\r\n{"a":1}'
        % server.port
    ]


async def test_a_stream_reaches_the_sink_chunk_by_chunk_as_it_arrives() -> None:
    go = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)
        writer.write(STREAM_HEAD + _chunk(b"data: 1\n\n"))
        await writer.drain()
        await go.wait()
        writer.write(_chunk(b"data: 2\n\n") + b"0\r\n\r\n")
        await writer.drain()

    pool = _pool()
    async with backend(script) as server:
        got = await pool.send(_origin(server.port), "POST", "/s", [], b"{}")
        assert got.content_type == "text/event-stream"
        sink = Collected()
        got.stream(sink)
        for _ in range(100):
            if sink.chunks:
                break
            await asyncio.sleep(0.01)
        assert sink.chunks == [b"data: 1\n\n"] and not sink.ended.is_set()
        go.set()
        await asyncio.wait_for(sink.ended.wait(), 5)
        assert sink.chunks == [b"data: 1\n\n", b"data: 2\n\n"] and sink.error is None
        got.close()
    await pool.close()


async def test_a_kept_alive_connection_is_reused_unless_the_answer_ends_it() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            request = await _request(reader)
            closing = b"/close" in request
            extra = b"Connection: close\r\n" if closing else b""
            writer.write(b"HTTP/1.1 200 OK\r\n" + extra + b"Content-Length: 2\r\n\r\nok")
            await writer.drain()
            if closing:
                return

    pool = _pool()
    async with backend(script) as server:
        for path in ("/a", "/b", "/close", "/c"):
            got = await pool.send(_origin(server.port), "GET", path, [])
            assert await got.read() == b"ok"
            got.close()
        assert server.connections == 2  # /a /b /close on the first, /c on a new one
    await pool.close()


@pytest.mark.parametrize("how", ["reset", "close"])
async def test_a_kept_alive_connection_the_backend_ended_is_tried_once_more_on_a_new_one(how: str) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")  # the next request: the connection ends under it
        if how == "reset":
            _reset(writer)

    pool = _pool()
    async with backend(script) as server:
        for _ in range(3):
            got = await pool.send(_origin(server.port), "POST", "/x", [], b"{}")
            assert await got.read() == b"ok"
            got.close()
        assert server.connections == 3
    await pool.close()


async def test_a_new_connection_that_breaks_before_the_answer_is_not_tried_again() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await reader.readuntil(b"\r\n\r\n")
        _reset(writer)

    pool = _pool()
    async with backend(script) as server:
        with pytest.raises(ConnectionBroken) as broken:
            await pool.send(_origin(server.port), "POST", "/x", [], b"{}")
        assert not broken.value.reused and server.connections == 1
    await pool.close()


async def test_a_connection_that_cannot_be_made_is_connect_failed() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    pool = _pool()
    with pytest.raises(ConnectFailed, match=r"cannot connect to 127\.0\.0\.1"):
        await pool.send(_origin(port), "GET", "/", [])
    await pool.close()


@pytest.mark.parametrize(
    "rest",
    [
        pytest.param(b"Content-Length: 10\r\n\r\nhalf", id="short-then-reset"),
        pytest.param(b"Transfer-Encoding: chunked\r\n\r\n" + _chunk(b"data: 1\n\n"), id="chunks-then-reset"),
        pytest.param(b"Transfer-Encoding: chunked\r\n\r\nnot-hex\r\n", id="malformed-chunk"),
    ],
)
async def test_an_answer_cut_short_fails_its_sink(rest: bytes) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n" + rest)
        await writer.drain()
        await asyncio.sleep(0.05)
        _reset(writer)

    pool = _pool()
    async with backend(script) as server:
        got = await pool.send(_origin(server.port), "POST", "/x", [], b"{}")
        sink = Collected()
        got.stream(sink)
        await asyncio.wait_for(sink.ended.wait(), 5)
        assert isinstance(sink.error, AnswerBroken)
        got.close()
        # a broken connection is never reused
        assert pool.open_connections == 0
    await pool.close()


async def test_what_a_read_brought_before_a_malformed_chunk_is_flushed_before_the_sink_fails() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(_chunk(b"data: 1\n\n") + b"not-hex\r\n")  # one read: a good chunk, then garbage
        await writer.drain()
        await asyncio.sleep(1)

    order: list[str] = []

    class Ordered(Collected):
        def flush(self) -> None:
            order.append("flush")

        def failed(self, error: AnswerBroken) -> None:
            order.append("failed")
            super().failed(error)

    pool = _pool()
    async with backend(script) as server:
        got = await pool.send(_origin(server.port), "POST", "/x", [], b"{}")
        sink = Ordered()
        got.stream(sink)
        await asyncio.wait_for(sink.ended.wait(), 5)
        assert b"".join(sink.chunks) == b"data: 1\n\n"
        assert order == ["flush", "failed"]
        got.close()
    await pool.close()


async def test_a_silent_backend_is_cut_off_after_the_read_timeout_but_a_paused_reader_is_not() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunk(b"data: 1\n\n"))
        await writer.drain()
        await asyncio.sleep(30)

    pool = _pool(read_timeout=0.3)
    async with backend(script) as server:
        held = await pool.send(_origin(server.port), "POST", "/x", [], b"{}")
        held.pause_reading()  # the router waits for its client: not the backend's silence
        got = await pool.send(_origin(server.port), "POST", "/x", [], b"{}")
        sink = Collected()
        started = asyncio.get_running_loop().time()
        got.stream(sink)
        await asyncio.wait_for(sink.ended.wait(), 5)
        assert isinstance(sink.error, AnswerSilent)
        assert 0.25 < asyncio.get_running_loop().time() - started < 2
        held_sink = Collected()
        held.stream(held_sink)
        assert not held_sink.ended.is_set()  # still open: it was paused, not silent
        held.close()
        got.close()
    await pool.close()


async def test_an_idle_connection_is_closed_after_the_keepalive() -> None:
    closed = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        assert await reader.read() == b""  # the router closed it
        closed.set()

    pool = _pool(keepalive=0.2)
    async with backend(script) as server:
        got = await pool.send(_origin(server.port), "GET", "/", [])
        await got.read()
        got.close()
        assert pool.open_connections == 1
        await asyncio.wait_for(closed.wait(), 5)
        assert pool.open_connections == 0
    await pool.close()


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\0b"])
async def test_a_header_with_a_line_break_is_never_sent(value: str) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)

    pool = _pool()
    async with backend(script) as server:
        with pytest.raises(InvalidHeader):
            await pool.send(_origin(server.port), "POST", "/", [("Authorization", value)], b"{}")
        assert server.connections == 0
    await pool.close()


async def test_tls_to_a_backend_whose_certificate_is_trusted_and_not_otherwise(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(pki.serving_cert, pki.serving_key)

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
        await writer.drain()

    async with backend(script, tls=serving) as server:
        trusting = Pool(
            keepalive=4.0, read_timeout=5.0, ssl_context=ssl.create_default_context(cafile=pki.ca_cert)
        )
        got = await trusting.send(_origin(server.port, "https", "localhost"), "POST", "/", [], b"{}")
        assert await got.read() == b"secret"
        got.close()
        await trusting.close()
        stranger = _pool()  # the system's CAs: the test CA is not among them
        with pytest.raises(ConnectFailed, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            await stranger.send(_origin(server.port, "https", "localhost"), "POST", "/", [], b"{}")
        await stranger.close()


async def test_a_late_call_on_an_answer_that_is_over_leaves_the_next_answer_on_its_connection_alone() -> None:
    """A stream's end releases its connection at once (in the callback); the relay's `finally`
    closes its answer later, and a drain callback may resume it later still: by then another
    request may be on that connection."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await _request(reader)
            writer.write(STREAM_HEAD + _chunk(b"data: x\n\n") + b"0\r\n\r\n")
            await writer.drain()

    pool = _pool()
    async with backend(script) as server:
        first = await pool.send(_origin(server.port), "POST", "/1", [], b"{}")
        sink = Collected()
        first.stream(sink)
        await asyncio.wait_for(sink.ended.wait(), 5)
        second = await pool.send(_origin(server.port), "POST", "/2", [], b"{}")
        assert server.connections == 1  # the same connection
        first.pause_reading()
        first.close()
        first.resume_reading()
        late = Collected()
        first.stream(late)
        assert isinstance(late.error, AnswerBroken)
        assert await second.read() == b"data: x\n\n"
        second.close()
        assert pool.open_connections == 1
    await pool.close()


async def test_chunks_read_together_are_flushed_together_once_each_has_been_through_the_sink() -> None:
    go, finish = asyncio.Event(), asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await _request(reader)
        writer.write(STREAM_HEAD)
        await writer.drain()
        await go.wait()
        writer.write(b"".join(_chunk(b"data: %d\n\n" % i) for i in range(3)))  # one write, three chunks
        await writer.drain()
        await finish.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    pool = _pool()
    async with backend(script) as server:
        got = await pool.send(_origin(server.port), "POST", "/s", [], b"{}")
        sink = Collected()
        got.stream(sink)
        go.set()
        for _ in range(100):
            if len(sink.chunks) == 3:
                break
            await asyncio.sleep(0.01)
        assert sink.chunks == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]
        assert sink.flushes == 1
        finish.set()
        await asyncio.wait_for(sink.ended.wait(), 5)
        got.close()
    await pool.close()
