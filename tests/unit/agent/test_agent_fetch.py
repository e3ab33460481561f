"""The host agent's downloads (llmkube/agent/fetch.py) against real HTTP servers on loopback that
answer the way hostile or broken sources do: without a length, for ever, longer than they said,
slower than a trickle; a disk that fills up under the download (a small tmpfs); an honest server
whose connection drops (the download resumes); and a Hugging Face Model's files through a stand-in
of the Hub (tests/support/llmkube_testing/hfhub.py).

The servers are raw asyncio servers writing the bytes of HTTP/1.1 themselves (an HTTP library
would not send a body longer than its Content-Length), and count what they sent and when the
agent hung up."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from llmkube_testing.hfhub import HubState, running_hub

from llmkube.agent import fetch
from llmkube.agent.fetch import ModelStore
from llmkube.api.model import Model
from llmkube.plan.agent.artifact import FetchFailed, Fetching, ModelFile
from llmkube.plan.agent.download import MIB, DownloadLimits
from llmkube.plan.model.egress import EgressPolicy, parse_allowed_hosts
from llmkube.plan.model.source import cache_key
from llmkube.sources import GuardedResolver

LOOPBACK = EgressPolicy(allowed=parse_allowed_hosts("127.0.0.1"))
# Small enough for a test's disk; the default margin (64 MiB) would dwarf the files here.
LIMITS = DownloadLimits(max_file_bytes=64 * MIB, min_speed=0, disk_margin=0)
WITHIN = 20.0  # seconds any one fetch here may take, however the source behaves


def loopback_policy() -> EgressPolicy:
    return LOOPBACK


# -- a raw HTTP/1.1 server ------------------------------------------------------------------------
@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]


Handler = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class RawServer:
    handler: Handler
    requests: list[Request] = field(default_factory=list)
    sent: int = 0  # body bytes written (and drained) over every connection
    connections: int = 0
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)  # the client closed a connection
    server: asyncio.Server | None = None

    @property
    def base(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *fields = head.decode("latin-1").split("\r\n")
                method, path, _ = line.split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields if f)
                }
                self.requests.append(Request(method, path, headers))
                await self.handler(Request(method, path, headers), writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.hung_up.set()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def write(self, writer: asyncio.StreamWriter, data: bytes, *, body: bool = True) -> None:
        writer.write(data)
        await writer.drain()  # raises ConnectionResetError once the agent has hung up
        if body:
            self.sent += len(data)


def head(status: str, **headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[RawServer]:
    raw = RawServer(handler)
    raw.server = await asyncio.start_server(raw._serve, "127.0.0.1", 0)
    try:
        yield raw
    finally:
        raw.server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(raw.server.wait_closed(), 5)


# -- the store --------------------------------------------------------------------------------------
@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """The agent's own kind of session: names resolved through the egress policy."""
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(loopback_policy))
    async with aiohttp.ClientSession(connector=connector) as client:
        yield client


@pytest.fixture
def retry_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed fetch is tried again after 0.2 s (the agent waits 30 s first)."""
    monkeypatch.setattr(fetch, "RETRY_INITIAL", 0.2)


def store_for(
    cache: Path, session: aiohttp.ClientSession, limits: DownloadLimits = LIMITS, hf_endpoint: str = ""
) -> ModelStore:
    return ModelStore(
        cache,
        (),
        session,
        loopback_policy,
        lambda _source: None,
        limits=limits,
        **({"hf_endpoint": hf_endpoint} if hf_endpoint else {}),
    )


def model(source: str, **spec: Any) -> Model:
    return Model.model_validate(
        {
            "metadata": {"name": "m", "namespace": "ai"},
            "spec": {
                "source": source,
                "hardware": {"accelerator": "metal", **spec.pop("hardware", {})},
                **spec,
            },
        }
    )


async def fetched(
    store: ModelStore, the_model: Model, *, after: object = None, within: float = WITHIN
) -> ModelFile | FetchFailed:
    """What the fetch came to; `after`: a failure seen before, which its retry replaces."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        artifact = store.get(the_model)
        if not isinstance(artifact, Fetching) and artifact is not after:
            return artifact
        await asyncio.sleep(0.02)
    raise TimeoutError(f"still fetching after {within} s: {store.get(the_model)}")


def files_in(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size for p in directory.rglob("*") if p.is_file()}


def contents(path: str | Path) -> bytes:
    return Path(path).read_bytes()


def data_of(size: int, seed: int = 1) -> bytes:
    return (hashlib.sha256(str(seed).encode()).digest() * (size // 32 + 1))[:size]


async def endless(raw: RawServer, writer: asyncio.StreamWriter, piece: bytes, *, chunked: bool) -> None:
    """A body that never ends, until the client hangs up."""
    while True:
        await raw.write(writer, chunk(piece) if chunked else piece)


# -- no length ----------------------------------------------------------------------------------------
async def test_an_answer_without_a_length_is_refused_when_the_model_declares_no_size(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async def handler(request: Request, writer: asyncio.StreamWriter) -> None:
        await raw.write(writer, head("200 OK", Transfer_Encoding="chunked", ETag='"v1"'), body=False)
        await endless(raw, writer, b"x" * 65536, chunked=True)

    async with serving(handler) as raw:
        started = time.monotonic()
        result = await fetched(store_for(tmp_path / "cache", session), model(f"{raw.base}/m.gguf"))
        assert isinstance(result, FetchFailed), result
        assert result.reason == "ModelFetchFailed"
        assert result.message.startswith(f"{raw.base}/m.gguf answered without a length (no Content-Length)")
        assert "hardware.memoryBudget" in result.message
        await asyncio.wait_for(raw.hung_up.wait(), WITHIN)  # the connection closed, not drained
        assert time.monotonic() - started < WITHIN
    assert files_in(tmp_path / "cache") == {}  # nothing written, not even the ETag


# -- for ever -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "limits", "words", "limit"),
    [
        # No length: the declared size is the most it may take...
        (
            {"hardware": {"memoryBudget": "8Mi"}},
            LIMITS,
            "past its Model's hardware.memoryBudget (8Mi)",
            8 * MIB,
        ),
        # ... and never more than the agent's cap.
        (
            {"hardware": {"memoryBudget": "1Gi"}},
            DownloadLimits(max_file_bytes=4 * MIB, min_speed=0, disk_margin=0),
            "past --max-model-bytes (4.0 MiB)",
            4 * MIB,
        ),
    ],
)
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "until-close"])
async def test_a_server_that_streams_for_ever_is_stopped_at_the_limit_and_its_part_deleted(
    tmp_path: Path,
    session: aiohttp.ClientSession,
    spec: dict[str, Any],
    limits: DownloadLimits,
    words: str,
    limit: int,
    chunked: bool,
) -> None:
    async def handler(request: Request, writer: asyncio.StreamWriter) -> None:
        framing = {"Transfer_Encoding": "chunked"} if chunked else {"Connection": "close"}
        await raw.write(writer, head("200 OK", ETag='"v1"', **framing), body=False)
        await endless(raw, writer, b"y" * 65536, chunked=chunked)

    async with serving(handler) as raw:
        started = time.monotonic()
        store = store_for(tmp_path / "cache", session, limits)
        result = await fetched(store, model(f"{raw.base}/m.gguf", **spec))
        elapsed = time.monotonic() - started
        assert isinstance(result, FetchFailed), result
        assert words in result.message and result.message.startswith(f"{raw.base}/m.gguf: "), result.message
        assert f"more than {limit}" in result.message
        await asyncio.wait_for(raw.hung_up.wait(), WITHIN)
        # What it sent beyond the limit is what the sockets' buffers held when the agent hung up.
        assert limit < raw.sent < limit + 16 * MIB, raw.sent
    print(f"endless source stopped at {limit} bytes in {elapsed:.2f} s")
    assert elapsed < 10
    assert files_in(tmp_path / "cache") == {}


# -- longer than it said ----------------------------------------------------------------------------
async def test_a_body_longer_than_its_content_length_gives_the_announced_bytes_and_never_the_next_answer(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """The rest of an over-long body stays on the connection, where it reads as an answer of its
    own (here one that says "EVIL!"): the agent closes every download's connection, so the next
    request never gets it."""
    good, other = data_of(MIB), data_of(4096, seed=2)
    smuggled = head("200 OK", Content_Length="5", ETag='"evil"') + b"EVIL!"

    async def handler(request: Request, writer: asyncio.StreamWriter) -> None:
        if request.path == "/m.gguf":
            await raw.write(writer, head("200 OK", Content_Length=str(len(good)), ETag='"v1"'), body=False)
            await raw.write(writer, good + smuggled + data_of(MIB, seed=3))
        else:
            await raw.write(writer, head("200 OK", Content_Length=str(len(other)), ETag='"v2"'), body=False)
            await raw.write(writer, other)

    async with serving(handler) as raw:
        store = store_for(tmp_path / "cache", session)
        first = model(f"{raw.base}/m.gguf", sha256=hashlib.sha256(good).hexdigest())
        result = await fetched(store, first)
        assert isinstance(result, ModelFile), result
        assert contents(result.path) == good
        second = await fetched(store, model(f"{raw.base}/other.gguf"))
        assert isinstance(second, ModelFile), second
        assert contents(second.path) == other
        assert raw.connections == 2, "a download's connection was used again"


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
async def test_a_body_longer_than_the_model_declares_is_stopped_or_refused(
    tmp_path: Path, session: aiohttp.ClientSession, framing: str
) -> None:
    body = data_of(3 * MIB)

    async def handler(request: Request, writer: asyncio.StreamWriter) -> None:
        if framing == "chunked":
            await raw.write(writer, head("200 OK", Transfer_Encoding="chunked"), body=False)
            for at in range(0, len(body), 65536):
                await raw.write(writer, chunk(body[at : at + 65536]))
            await raw.write(writer, b"0\r\n\r\n")
        else:
            await raw.write(writer, head("200 OK", Content_Length=str(len(body))), body=False)
            await raw.write(writer, body)

    async with serving(handler) as raw:
        result = await fetched(
            store_for(tmp_path / "cache", session),
            model(f"{raw.base}/m.gguf", hardware={"memoryBudget": "2Mi"}),
        )
    assert isinstance(result, FetchFailed), result
    if framing == "chunked":  # no length: stopped the moment it passed the declared size
        assert f"more than {2 * MIB}, past its Model's hardware.memoryBudget (2Mi)" in result.message
    else:  # its length said so: refused before a byte
        assert (
            "is 3.0 MiB (3145728 bytes), more than its Model's hardware.memoryBudget (2Mi)" in result.message
        )
    assert files_in(tmp_path / "cache") == {}


async def test_a_resumed_answer_longer_than_its_range_is_stopped(
    tmp_path: Path, session: aiohttp.ClientSession, retry_at_once: None
) -> None:
    data = data_of(2 * MIB)
    half = len(data) // 2

    async def handler(request: Request, writer: asyncio.StreamWriter) -> None:
        if "range" not in request.headers:
            await raw.write(writer, head("200 OK", Content_Length=str(len(data)), ETag='"v1"'), body=False)
            await raw.write(writer, data[:half])
            raise ConnectionResetError  # cut: the agent keeps the part (a length and an ETag)
        # Resumed, chunked: the Content-Range says the rest; the body goes on past it.
        start = int(request.headers["range"].removeprefix("bytes=").rstrip("-"))
        rest = f"bytes {start}-{len(data) - 1}/{len(data)}"
        await raw.write(
            writer,
            head("206 Partial Content", Content_Range=rest, Transfer_Encoding="chunked", ETag='"v1"'),
            body=False,
        )
        await endless(raw, writer, b"z" * 65536, chunked=True)

    async with serving(handler) as raw:
        store = store_for(tmp_path / "cache", session)
        the_model = model(f"{raw.base}/m.gguf")
        cut = await fetched(store, the_model)
        assert isinstance(cut, FetchFailed) and "(the part is kept and resumed next time)" in cut.message, cut
        partial = tmp_path / "cache" / cache_key(f"{raw.base}/m.gguf") / "m.gguf.partial"
        kept = partial.stat().st_size
        assert 0 < kept <= half
        result = await fetched(store, the_model, after=cut)
        assert isinstance(result, FetchFailed), result
        assert f"more than {len(data)}, past the length it announced ({len(data)} bytes)" in result.message
        assert raw.requests[1].headers["range"] == f"bytes={kept}-"
    assert files_in(tmp_path / "cache") == {}


# -- slower than a trickle ----------------------------------------------------------------------------
@pytest.mark.parametrize("etag", ['"v1"', None], ids=["resumable", "no-etag"])
async def test_a_body_slower_than_the_floor_is_cut_in_bounded_time(
    tmp_path: Path, session: aiohttp.ClientSession, etag: str | None
) -> None:
    async def handler(request: Request, writer: asyncio.StreamWriter) -> None:
        extra = {"ETag": etag} if etag else {}
        await raw.write(writer, head("200 OK", Content_Length=str(MIB), **extra), body=False)
        while True:  # 1000 bytes a second, for ever
            await raw.write(writer, b"t" * 100)
            await asyncio.sleep(0.1)

    limits = DownloadLimits(max_file_bytes=64 * MIB, min_speed=10_000, min_speed_time=1.0, disk_margin=0)
    async with serving(handler) as raw:
        started = time.monotonic()
        result = await fetched(store_for(tmp_path / "cache", session, limits), model(f"{raw.base}/m.gguf"))
        elapsed = time.monotonic() - started
        await asyncio.wait_for(raw.hung_up.wait(), WITHIN)
    assert isinstance(result, FetchFailed), result
    assert (
        "fewer than 10000 bytes arrived in 1 s, slower than 9.8 KiB/s (--download-min-speed)"
        in result.message
    )
    print(f"a trickle of 1000 B/s cut after {elapsed:.2f} s (floor 10000 B/s over 1 s)")
    assert 0.9 < elapsed < 5
    left = files_in(tmp_path / "cache")
    if etag:  # resumable: the honest part stays for the next attempt
        assert "the part is kept" in result.message
        (kept,) = [size for name, size in left.items() if name.endswith(".partial")]
        assert 0 < kept <= raw.sent and any(name.endswith(".partial.etag") for name in left)
    else:
        assert "the partial file deleted" in result.message and left == {}


# -- a full disk ----------------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs of this test's own (root only)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"a small tmpfs cannot be mounted here (it needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


async def test_a_disk_that_fills_up_under_the_download_deletes_the_part_and_says_what_was_missing(
    small_disk: Path, session: aiohttp.ClientSession, retry_at_once: None
) -> None:
    data = data_of(6 * MIB)
    gate = asyncio.Event()

    async def handler(request: Request, writer: asyncio.StreamWriter) -> None:
        await raw.write(writer, head("200 OK", Content_Length=str(len(data)), ETag='"v1"'), body=False)
        await raw.write(writer, data[:MIB])
        await gate.wait()  # meanwhile something else fills the disk
        await raw.write(writer, data[MIB:])

    cache = small_disk / "cache"
    async with serving(handler) as raw:
        store = store_for(cache, session)
        the_model = model(f"{raw.base}/m.gguf", sha256=hashlib.sha256(data).hexdigest())
        assert isinstance(store.get(the_model), Fetching)
        partial = cache / cache_key(f"{raw.base}/m.gguf") / "m.gguf.partial"
        for _ in range(500):
            if partial.is_file() and partial.stat().st_size >= MIB:
                break
            await asyncio.sleep(0.01)
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        filler = small_disk / "someone-else"
        filler.write_bytes(b"\0" * (free - 512 * 1024))
        gate.set()
        result = await fetched(store, the_model)
        assert isinstance(result, FetchFailed), result
        assert result.message.startswith(
            f"the model cache {cache} ran out of room (No space left on device) after "
        )
        assert (
            "more for the rest of the file and 0 B kept free; the partial file is deleted" in result.message
        )
        assert files_in(cache) == {}  # the part is gone: the disk is the host's, not the download's
        # The room made: the next attempt downloads it whole.
        filler.unlink()
        again = await fetched(store, the_model, after=result)
        assert isinstance(again, ModelFile), again
        assert contents(again.path) == data


async def test_a_disk_without_room_is_said_before_a_byte_is_written(
    small_disk: Path, session: aiohttp.ClientSession
) -> None:
    async def handler(request: Request, writer: asyncio.StreamWriter) -> None:
        await raw.write(writer, head("200 OK", Content_Length=str(16 * MIB)), body=False)
        await endless(raw, writer, b"d" * 65536, chunked=False)

    async with serving(handler) as raw:
        limits = DownloadLimits(max_file_bytes=64 * MIB, min_speed=0)  # the default margin, 64 MiB
        result = await fetched(store_for(small_disk / "cache", session, limits), model(f"{raw.base}/m.gguf"))
    assert isinstance(result, FetchFailed), result
    assert (
        f"needs 16.0 MiB more, and the model cache {small_disk / 'cache'} has 8.0 MiB free" in result.message
    )
    assert files_in(small_disk) == {}


# -- an honest server: resumed ------------------------------------------------------------------------
async def test_a_download_cut_short_is_resumed_from_where_it_stopped(
    tmp_path: Path, session: aiohttp.ClientSession, retry_at_once: None
) -> None:
    data = data_of(3 * MIB + 17)
    cut_at = MIB + 5

    async def handler(request: Request, writer: asyncio.StreamWriter) -> None:
        wanted = request.headers.get("range", "")
        if not wanted:
            await raw.write(writer, head("200 OK", Content_Length=str(len(data)), ETag='"v1"'), body=False)
            await raw.write(writer, data[:cut_at])
            raise ConnectionResetError  # the network drops it
        assert request.headers.get("if-range") == '"v1"'
        start = int(wanted.removeprefix("bytes=").rstrip("-"))
        rest = data[start:]
        await raw.write(
            writer,
            head(
                "206 Partial Content",
                Content_Length=str(len(rest)),
                Content_Range=f"bytes {start}-{len(data) - 1}/{len(data)}",
                ETag='"v1"',
            ),
            body=False,
        )
        await raw.write(writer, rest)

    async with serving(handler) as raw:
        store = store_for(tmp_path / "cache", session)
        the_model = model(f"{raw.base}/m.gguf", sha256=hashlib.sha256(data).hexdigest())
        cut = await fetched(store, the_model)
        assert isinstance(cut, FetchFailed), cut
        assert "(the part is kept and resumed next time)" in cut.message
        directory = tmp_path / "cache" / cache_key(f"{raw.base}/m.gguf")
        # What arrived before the drop (what the client had read of it: not always every byte sent).
        kept = (directory / "m.gguf.partial").stat().st_size
        assert 0 < kept <= cut_at
        result = await fetched(store, the_model, after=cut)
        assert isinstance(result, ModelFile), result
        assert contents(result.path) == data
        assert [r.headers.get("range") for r in raw.requests] == [None, f"bytes={kept}-"]
    assert sorted(files_in(directory)) == ["m.gguf", "m.gguf.sha256"]


# -- Hugging Face --------------------------------------------------------------------------------------
@pytest.fixture
def hub() -> Iterator[HubState]:
    with running_hub() as state:
        yield state


SHARDS = ["Q4/m-00001-of-00002.gguf", "Q4/m-00002-of-00002.gguf"]


async def test_a_hugging_face_model_s_files_are_fetched_from_the_hub_beside_each_other(
    tmp_path: Path, session: aiohttp.ClientSession, hub: HubState
) -> None:
    first, second, projector = data_of(300_000, 1), data_of(200_000, 2), data_of(500, 3)  # LFS, LFS, git
    hub.add("org/tiny-GGUF", {SHARDS[0]: first, SHARDS[1]: second, "mmproj.gguf": projector})
    the_model = model(
        "hf://org/tiny-GGUF", files=SHARDS, mmproj="mmproj.gguf", sha256=hashlib.sha256(first).hexdigest()
    )
    store = store_for(tmp_path / "cache", session, hf_endpoint=hub.base)
    result = await fetched(store, the_model)
    assert isinstance(result, ModelFile), result
    base = tmp_path / "cache" / cache_key("hf://org/tiny-GGUF") / "files"
    assert result.path == str(base / SHARDS[0]) and result.mmproj == str(base / "mmproj.gguf")
    assert contents(base / SHARDS[1]) == second and contents(result.path) == first
    assert contents(result.mmproj) == projector
    assert result.size == len(first) + len(second) + len(projector)
    # Each file from the Hub's file API (its LFS files through the redirect); nothing else asked.
    asked = [(r.method, r.path) for r in hub.requests]
    for path in [*SHARDS, "mmproj.gguf"]:
        assert ("GET", f"/org/tiny-GGUF/resolve/main/{path}") in asked
    assert sum(1 for _, path in asked if path.startswith("/lfs/")) == 2
    assert not [p for _, p in asked if p.startswith("/api/")]
    assert not [p for p in files_in(tmp_path / "cache") if p.endswith((".partial", ".etag"))]

    # A restarted agent finds them in its cache: not a request more.
    before = len(hub.requests)
    again = await fetched(store_for(tmp_path / "cache", session, hf_endpoint=hub.base), the_model)
    assert isinstance(again, ModelFile) and again.identity == result.identity
    assert len(hub.requests) == before


async def test_a_hugging_face_model_s_declared_size_covers_its_files_together(
    tmp_path: Path, session: aiohttp.ClientSession, hub: HubState
) -> None:
    hub.add("org/big-GGUF", {SHARDS[0]: data_of(600_000, 1), SHARDS[1]: data_of(600_000, 2)})
    the_model = model("hf://org/big-GGUF", files=SHARDS, hardware={"memoryBudget": "1M"})
    result = await fetched(store_for(tmp_path / "cache", session, hf_endpoint=hub.base), the_model)
    assert isinstance(result, FetchFailed), result
    assert result.message.startswith(f"{hub.base}/org/big-GGUF/resolve/main/{SHARDS[1]} is 585.9 KiB")
    assert (
        "more than what its Model's hardware.memoryBudget (1M) leaves beside its other files (600000 bytes)"
        in (result.message)
    )
    # The first file is in the cache; of the second, not a byte.
    left = sorted(files_in(tmp_path / "cache" / cache_key("hf://org/big-GGUF")))
    assert len(left) == 2 and left[0].endswith(".sha256") and left[1] == f"files/{SHARDS[0]}", left


async def test_a_hugging_face_repository_without_files_is_not_fetched(
    tmp_path: Path, session: aiohttp.ClientSession, hub: HubState
) -> None:
    result = store_for(tmp_path / "cache", session, hf_endpoint=hub.base).get(model("hf://org/whole-repo"))
    assert isinstance(result, FetchFailed) and result.retry_at == float("inf")
    assert "Name the .gguf file in spec.files" in result.message
    assert hub.requests == []


# -- local files' descriptors ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("edit", "closed"),
    [
        ({}, False),  # still named: stays open
        ({"sha256": "0" * 64}, True),  # the Model edited: another fetch, the old file closes
        (None, True),  # no Model names it any more
    ],
)
async def test_a_local_file_stays_open_only_while_a_model_names_it(
    tmp_path: Path, session: aiohttp.ClientSession, edit: dict[str, str] | None, closed: bool
) -> None:
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF" + data_of(4096))
    store = ModelStore(tmp_path / "cache", (str(tmp_path),), session, loopback_policy, lambda _s: None)
    named = model(f"file://{weights}")
    opened = store.get(named)
    assert isinstance(opened, ModelFile) and opened.pass_fd is not None
    os.fstat(opened.pass_fd)  # open
    in_use = set() if edit is None else {ModelStore.key_of(model(f"file://{weights}", **edit))}
    store.forget_unused(in_use)
    assert store.holds_open_files() is not closed
    if closed:
        with pytest.raises(OSError):
            os.fstat(opened.pass_fd)
    else:
        assert os.fstat(opened.pass_fd).st_size == weights.stat().st_size
