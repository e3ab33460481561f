"""The router's HTTP/1.1 server (llmkube.router.http.server) on a loopback port, spoken to in raw
bytes: keep-alive and its ends, pipelining, bodies over the limit, 100-continue, what a hostile
client can send (malformed and smuggling heads, heads too large, a slow head, upgrades), a client
that leaves, back-pressure, and a graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from llmkube.router.http.messages import BodyError, Request
from llmkube.router.http.server import HttpServer, Limits, Responder

Handler = Callable[[Request, Responder], Awaitable[None]]


@dataclass
class Served:
    server: HttpServer
    port: int
    requests: list[Request] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)


async def _echo(request: Request, responder: Responder) -> None:
    body = await request.read_body()
    body = body if body is not None else b"<too large>"
    responder.respond(200, [("Content-Type", "text/plain"), ("X-Path", request.path)], body)


@contextlib.asynccontextmanager
async def serving(
    handler: Handler = _echo, *, limit: int = 1024, limits: Limits | None = None
) -> AsyncIterator[Served]:
    served: Served

    async def recording(request: Request, responder: Responder) -> None:
        served.requests.append(request)
        try:
            await handler(request, responder)
        except asyncio.CancelledError:
            served.cancelled.append(request.path)
            raise

    server = HttpServer(recording, body_limit=lambda: limit, limits=limits)
    _, port = await server.start("127.0.0.1", 0)
    served = Served(server, port)
    try:
        yield served
    finally:
        await server.close()


async def _answer(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, str], bytes]:
    """One answer: its status line, headers (lower-case names) and body (Content-Length, chunked or
    to the end of the connection)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    status = lines[0].encode()
    if status[8:10] == b" 1":  # 1xx: no body
        return status, headers, b""
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            data = await reader.readexactly(size + 2)
            if size == 0:
                return status, headers, body
            body += data[:-2]
    return status, headers, await asyncio.wait_for(reader.read(), 5)


async def _closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 5) == b""
    except ConnectionResetError:
        return True


def _post(path: str, body: bytes, *extra: str) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: r\r\nContent-Length: {len(body)}\r\n"
    return (head + "".join(f"{h}\r\n" for h in extra) + "\r\n").encode() + body


async def test_keep_alive_answers_each_request_on_one_connection_and_close_ends_it() -> None:
    async with serving() as served:
        reader, writer = await served.connect()
        for i in range(3):
            writer.write(_post(f"/n{i}", b"body %d" % i))
            status, headers, body = await _answer(reader)
            assert status == b"HTTP/1.1 200 OK" and body == b"body %d" % i
            assert headers["x-path"] == f"/n{i}" and "connection" not in headers and "date" in headers
        writer.write(_post("/last", b"x", "Connection: close"))
        status, headers, body = await _answer(reader)
        assert body == b"x" and headers["connection"] == "close"
        assert await _closed(reader)
        writer.close()


@pytest.mark.parametrize(
    ("request_bytes", "kept"),
    [
        (b"GET /a HTTP/1.0\r\n\r\n", False),
        (b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", True),
        (b"GET /a HTTP/1.1\r\nHost: r\r\n\r\n", True),
    ],
)
async def test_http_1_0_closes_unless_it_asks_for_keep_alive(request_bytes: bytes, kept: bool) -> None:
    async with serving() as served:
        reader, writer = await served.connect()
        writer.write(request_bytes)
        status, headers, _ = await _answer(reader)
        assert status.endswith(b"200 OK")
        assert ("connection" in headers) is not kept
        if not kept:
            assert await _closed(reader)
        writer.close()


async def test_pipelined_requests_are_answered_in_order() -> None:
    async def slow_first(request: Request, responder: Responder) -> None:
        if request.path == "/1":
            await asyncio.sleep(0.1)
        await _echo(request, responder)

    async with serving(slow_first) as served:
        reader, writer = await served.connect()
        writer.write(_post("/1", b"one") + _post("/2", b"two") + _post("/3", b"three"))
        bodies = [(await _answer(reader))[2] for _ in range(3)]
        assert bodies == [b"one", b"two", b"three"]
        writer.close()


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(_post("/big", b"x" * 2000), id="declared"),
        pytest.param(
            b"POST /big HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"".join(b"200\r\n" + b"x" * 512 + b"\r\n" for _ in range(4)),
            id="chunked-counted",
        ),
    ],
)
async def test_a_body_over_the_limit_is_handed_over_unread_and_the_connection_ends(
    request_bytes: bytes,
) -> None:
    async with serving(limit=1024) as served:
        reader, writer = await served.connect()
        writer.write(request_bytes)
        _, headers, body = await _answer(reader)
        assert body == b"<too large>" and headers["connection"] == "close"
        assert await served.requests[0].read_body() is None
        assert await _closed(reader)
        writer.close()


async def test_expect_100_continue_is_answered_only_for_a_body_that_will_be_read() -> None:
    async with serving(limit=1024) as served:
        reader, writer = await served.connect()
        writer.write(b"POST /e HTTP/1.1\r\nHost: r\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        status, _, _ = await _answer(reader)
        assert status == b"HTTP/1.1 100 Continue"
        writer.write(b"hello")
        assert (await _answer(reader))[2] == b"hello"
        # Over the limit: no 100, the final answer at once (the client never sends the body).
        writer.write(b"POST /e HTTP/1.1\r\nHost: r\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
        status, headers, body = await _answer(reader)
        assert status.endswith(b"200 OK") and body == b"<too large>" and headers["connection"] == "close"
        writer.close()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        pytest.param(b"NOT HTTP AT ALL\r\n\r\n", 400, id="garbage"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: r\r\nBad Header\r\n\r\n", 400, id="no-colon"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: r\r\nX: a\x00b\r\n\r\n", 400, id="nul-in-value"),
        pytest.param(
            b"POST / HTTP/1.1\r\nHost: r\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
            id="smuggling-cl-and-te",
        ),
        pytest.param(
            b"POST / HTTP/1.1\r\nHost: r\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
            400,
            id="two-lengths",
        ),
        pytest.param(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 431, id="long-url"),
        pytest.param(b"GET / HTTP/1.1\r\nX: " + b"v" * 70_000 + b"\r\n\r\n", 431, id="long-header"),
        pytest.param(
            b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(300)) + b"\r\n",
            431,
            id="many-headers",
        ),
    ],
)
async def test_a_hostile_head_is_refused_by_the_server_and_the_connection_ends(
    request_bytes: bytes, status: int
) -> None:
    async with serving() as served:
        reader, writer = await served.connect()
        writer.write(request_bytes)
        line, headers, body = await _answer(reader)
        assert line.startswith(b"HTTP/1.1 %d " % status), line
        assert headers["connection"] == "close" and body.endswith(b"\n")
        assert await _closed(reader)
        assert served.requests == []  # the handler never saw it
        writer.close()
        # and the server goes on serving others
        reader, writer = await served.connect()
        writer.write(_post("/ok", b"fine"))
        assert (await _answer(reader))[2] == b"fine"
        writer.close()


async def test_a_malformed_body_is_a_body_error_for_the_handler_and_a_400_for_the_client() -> None:
    errors: list[BodyError] = []

    async def reading(request: Request, responder: Responder) -> None:
        try:
            await request.read_body()
        except BodyError as error:
            errors.append(error)
            raise  # let through: the server answers it

    async with serving(reading) as served:
        reader, writer = await served.connect()
        writer.write(b"POST /b HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        line, headers, body = await _answer(reader)
        assert line.startswith(b"HTTP/1.1 400 ") and b"chunk size" in body
        assert headers["connection"] == "close" and await _closed(reader)
        assert [error.status for error in errors] == [400]
        writer.close()


async def test_a_refusal_before_the_body_is_read_spares_the_read_and_ends_the_connection() -> None:
    """A handler that answers from the head alone (no key: 401) never makes the server read the
    body: no 100-continue for it, and the connection ends after the answer."""

    async def refusing(request: Request, responder: Responder) -> None:
        responder.respond(401, [("Content-Type", "text/plain")], b"no key")

    async with serving(refusing, limit=1 << 20) as served:
        reader, writer = await served.connect()
        writer.write(b"POST /r HTTP/1.1\r\nHost: r\r\nContent-Length: 500000\r\nExpect: 100-continue\r\n\r\n")
        line, headers, body = await _answer(reader)
        assert line.startswith(b"HTTP/1.1 401 ") and body == b"no key"
        assert headers["connection"] == "close" and await _closed(reader)
        writer.close()


async def test_an_upgrade_is_answered_as_a_plain_request_and_nothing_after_it_is_read() -> None:
    async with serving() as served:
        reader, writer = await served.connect()
        writer.write(
            b"GET /ws HTTP/1.1\r\nHost: r\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
            + b"\x81\x05hello"  # a frame of the protocol it asked for
        )
        status, headers, _ = await _answer(reader)
        assert status.endswith(b"200 OK") and headers["x-path"] == "/ws" and headers["connection"] == "close"
        assert await _closed(reader)
        assert [r.path for r in served.requests] == ["/ws"]
        writer.close()


async def test_the_servers_own_refusals_use_the_error_body_it_was_given() -> None:
    server = HttpServer(
        _echo,
        body_limit=lambda: 10,
        error_body=lambda status, message: ("application/json", b'{"error":"%d"}' % status),
    )
    _, port = await server.start("127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"BROKEN\r\n\r\n")
        _, headers, body = await _answer(reader)
        assert headers["content-type"] == "application/json" and body == b'{"error":"400"}'
        writer.close()
    finally:
        await server.close()


async def test_a_client_that_leaves_cancels_its_request() -> None:
    started = asyncio.Event()

    async def forever(request: Request, responder: Responder) -> None:
        started.set()
        await asyncio.Event().wait()

    async with serving(forever) as served:
        _, writer = await served.connect()
        writer.write(_post("/wait", b""))
        await asyncio.wait_for(started.wait(), 5)
        writer.close()
        for _ in range(100):
            if served.cancelled:
                break
            await asyncio.sleep(0.02)
        assert served.cancelled == ["/wait"]


async def test_an_idle_connection_a_slow_head_and_a_slow_body_are_closed_after_the_idle_timeout() -> None:
    async with serving(limits=Limits(idle_timeout=0.3)) as served:
        idle_reader, idle_writer = await served.connect()
        slow_reader, slow_writer = await served.connect()
        slow_writer.write(b"GET / HTTP/1.1\r\nHost: r\r\n")  # and never the end of the head
        body_reader, body_writer = await served.connect()
        body_writer.write(_post("/slow-body", b"0123456789")[:-7])  # the head, 3 bytes of 10
        started = asyncio.get_running_loop().time()
        assert await _closed(idle_reader) and await _closed(slow_reader) and await _closed(body_reader)
        assert asyncio.get_running_loop().time() - started < 3
        # The body's request reached the handler with its head; it waited for the body, and was
        # cancelled with the connection.
        assert [r.path for r in served.requests] == ["/slow-body"]
        assert served.cancelled == ["/slow-body"]
        for writer in (idle_writer, slow_writer, body_writer):
            writer.close()


async def test_head_gets_the_length_without_the_body() -> None:
    async with serving() as served:
        reader, writer = await served.connect()
        writer.write(b"HEAD /h HTTP/1.1\r\nHost: r\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert b"Content-Length: 0" in head
        writer.write(_post("/next", b"after"))  # no body was sent for HEAD: the next answer follows
        assert (await _answer(reader))[2] == b"after"
        writer.close()


async def test_a_failing_handler_answers_500_and_the_connection_goes_on() -> None:
    async def failing(request: Request, responder: Responder) -> None:
        if request.path == "/fail":
            raise RuntimeError("a defect")
        await _echo(request, responder)

    async with serving(failing) as served:
        reader, writer = await served.connect()
        writer.write(_post("/fail", b""))
        status, _, body = await _answer(reader)
        assert status.startswith(b"HTTP/1.1 500 ") and b"Traceback" not in body and b"a defect" not in body
        writer.write(_post("/ok", b"still"))
        assert (await _answer(reader))[2] == b"still"
        writer.close()


async def test_a_stream_left_unfinished_is_cut_off_not_ended() -> None:
    async def unfinished(request: Request, responder: Responder) -> None:
        responder.start(200, [("Content-Type", "text/event-stream")], b"data: 1\n\n")
        responder.send(b"data: 2\n\n")

    async with serving(unfinished) as served:
        reader, writer = await served.connect()
        writer.write(_post("/s", b""))
        received = await asyncio.wait_for(reader.read(), 5)
        assert received.startswith(b"HTTP/1.1 200 OK") and b"data: 2" in received
        assert not received.endswith(b"0\r\n\r\n")  # no last chunk: the client sees a broken stream
        writer.close()


async def test_a_stream_to_an_http_1_0_client_ends_with_the_connection() -> None:
    async def stream(request: Request, responder: Responder) -> None:
        responder.start(200, [("Content-Type", "text/event-stream")], b"a")
        responder.send(b"b")
        responder.end()

    async with serving(stream) as served:
        reader, writer = await served.connect()
        writer.write(b"POST /s HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
        _, headers, body = await _answer(reader)
        assert "transfer-encoding" not in headers and body == b"ab"
        writer.close()


async def test_a_stream_to_an_http_1_0_client_that_asked_for_keep_alive_says_it_will_close() -> None:
    async def stream(request: Request, responder: Responder) -> None:
        responder.start(200, [("Content-Type", "text/event-stream")], b"a")
        responder.end(b"b")

    async with serving(stream) as served:
        reader, writer = await served.connect()
        writer.write(b"POST /s HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        # without framing the close is the stream's end, so the head must not promise keep-alive
        assert b"\r\nConnection: close\r\n" in head
        assert await asyncio.wait_for(reader.read(), 5) == b"ab"
        writer.close()


async def test_a_client_that_does_not_read_pauses_the_writer_until_it_drains() -> None:
    paused = asyncio.Event()
    drained = asyncio.Event()

    async def flood(request: Request, responder: Responder) -> None:
        responder.start(200, [("Content-Type", "application/octet-stream")])
        chunk = b"x" * 65536
        while not responder.writing_paused:
            responder.send(chunk)
            await asyncio.sleep(0)
        paused.set()
        responder.when_drained(drained.set)
        await drained.wait()
        responder.end()

    async with serving(flood) as served:
        reader, writer = await served.connect()
        writer.write(_post("/flood", b""))
        await asyncio.wait_for(paused.wait(), 10)
        assert not drained.is_set()
        _, _, body = await _answer(reader)  # reading it all lets the writer drain
        assert drained.is_set() and len(body) >= 65536
        writer.close()


async def test_ending_connections_closes_idle_ones_now_and_busy_ones_after_their_answer() -> None:
    release = asyncio.Event()

    async def held(request: Request, responder: Responder) -> None:
        await release.wait()
        await _echo(request, responder)

    async with serving(held) as served:
        idle_reader, idle_writer = await served.connect()
        busy_reader, busy_writer = await served.connect()
        busy_writer.write(_post("/busy", b"done"))
        for _ in range(100):
            if served.requests:
                break
            await asyncio.sleep(0.01)
        served.server.stop_listening()
        served.server.end_connections()
        assert await _closed(idle_reader)
        assert served.server.busy == 1
        release.set()
        _, headers, body = await _answer(busy_reader)
        assert body == b"done" and headers["connection"] == "close"
        assert await _closed(busy_reader)
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", served.port)
        idle_writer.close()
        busy_writer.close()


async def test_a_responder_used_after_its_request_is_over_writes_nothing_into_the_next_answer() -> None:
    kept: list[Responder] = []

    async def keep(request: Request, responder: Responder) -> None:
        kept.append(responder)
        await _echo(request, responder)

    async with serving(keep) as served:
        reader, writer = await served.connect()
        writer.write(_post("/1", b"one"))
        assert (await _answer(reader))[2] == b"one"
        writer.write(_post("/2", b"two"))
        assert (await _answer(reader))[2] == b"two"
        stale = kept[0]
        assert stale.gone and not stale.send(b"late bytes")
        stale.end()
        stale.abort()  # must not end the connection the next request is on
        writer.write(_post("/3", b"three"))
        _, _, body = await _answer(reader)
        assert body == b"three"
        writer.close()
