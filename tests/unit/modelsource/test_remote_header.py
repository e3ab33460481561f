"""Reading only the GGUF header of a remote file, against a real local server."""

import asyncio
import os
from pathlib import Path

import aiohttp
import pytest
from llmkube_testing.hostile_gguf import HOSTILE
from modelsource_support import GGUFFactory, ModelHost, loopback_allowed

from llmkube.controllers.modelsource import HeaderReadOptions, read_remote_gguf_metadata
from llmkube.controllers.modelsource.remoteheader import parse_content_range
from llmkube.plan.model import HeaderFailure
from llmkube.sources import read_gguf_metadata

KIB = 1024
MIB = 1024 * KIB


@pytest.fixture
def options(tmp_path: Path) -> HeaderReadOptions:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return HeaderReadOptions(temp_dir=str(scratch))


async def test_small_file_in_one_request(
    model_host: ModelHost, session: aiohttp.ClientSession, make_gguf: GGUFFactory, options: HeaderReadOptions
) -> None:
    path = make_gguf(name="Tiny Llama")
    model_host.files["m.gguf"] = path.read_bytes()
    result = await read_remote_gguf_metadata(
        session, model_host.url("/ranged/m.gguf"), options, policy=loopback_allowed
    )
    assert result.failure is None
    assert result.metadata == read_gguf_metadata(str(path))  # same answer as parsing the whole file
    size = path.stat().st_size
    assert model_host.range_requests == [(0, size - 1)]  # asked for 256 KiB, the file is smaller
    assert result.bytes_fetched == model_host.body_bytes_sent == size
    assert os.listdir(options.temp_dir or "") == []  # the sparse temp file is gone


async def test_large_header_grows_the_prefix_and_transfers_only_the_header(
    model_host: ModelHost, session: aiohttp.ClientSession, make_gguf: GGUFFactory, options: HeaderReadOptions
) -> None:
    # ~600 KiB of tokenizer strings before 8 MiB of tensor data.
    path = make_gguf(name="Big Vocab", vocabulary=4_000, token_length=140, tensor_shape=(2048, 1024))
    model_host.files["big.gguf"] = data = path.read_bytes()
    result = await read_remote_gguf_metadata(
        session, model_host.url("/ranged/big.gguf"), options, policy=loopback_allowed
    )
    assert result.metadata is not None
    assert result.metadata == read_gguf_metadata(str(path))
    # 256 KiB, then doubling, each request continuing where the last one stopped.
    assert model_host.range_requests == [
        (0, 256 * KIB - 1),
        (256 * KIB, 512 * KIB - 1),
        (512 * KIB, 1 * MIB - 1),
    ]
    assert result.bytes_fetched == model_host.body_bytes_sent == 1 * MIB
    assert model_host.body_bytes_sent < len(data) / 8


async def test_server_without_range_support_is_hung_up_on(
    model_host: ModelHost, session: aiohttp.ClientSession, make_gguf: GGUFFactory, options: HeaderReadOptions
) -> None:
    model_host.files["m.gguf"] = make_gguf().read_bytes()
    result = await read_remote_gguf_metadata(
        session, model_host.url("/plain/m.gguf"), options, policy=loopback_allowed
    )
    assert (result.metadata, result.failure, result.bytes_fetched) == (
        None,
        HeaderFailure.RANGES_UNSUPPORTED,
        0,
    )
    # The server was streaming a 64 MiB body: it must have been cut off long before the end.
    await asyncio.wait_for(model_host.stream_finished.wait(), timeout=10)
    assert not model_host.stream_completed
    assert model_host.stream_written < 32 * MIB


@pytest.mark.parametrize(
    ("path", "failure", "detail_part"),
    [
        ("/ranged/absent.gguf", HeaderFailure.HTTP_STATUS, "404"),
        ("/status/503", HeaderFailure.HTTP_STATUS, "503"),
        ("/short/m.gguf", HeaderFailure.TRUNCATED, ""),
        ("/no-total/m.gguf", HeaderFailure.UNKNOWN_SIZE, "without a total size"),
    ],
)
async def test_broken_hosts(
    model_host: ModelHost,
    session: aiohttp.ClientSession,
    make_gguf: GGUFFactory,
    options: HeaderReadOptions,
    path: str,
    failure: HeaderFailure,
    detail_part: str,
) -> None:
    model_host.files["m.gguf"] = make_gguf(vocabulary=2_000, token_length=140).read_bytes()
    result = await read_remote_gguf_metadata(session, model_host.url(path), options, policy=loopback_allowed)
    assert (result.metadata, result.failure) == (None, failure)
    assert detail_part in result.detail
    assert os.listdir(options.temp_dir or "") == []


async def test_not_a_gguf_file_stops_after_the_first_request(
    model_host: ModelHost, session: aiohttp.ClientSession, options: HeaderReadOptions
) -> None:
    model_host.files["w.bin"] = os.urandom(2 * MIB)
    result = await read_remote_gguf_metadata(
        session, model_host.url("/ranged/w.bin"), options, policy=loopback_allowed
    )
    assert result.failure is HeaderFailure.NOT_GGUF
    assert model_host.range_requests == [(0, 256 * KIB - 1)]


async def test_header_larger_than_the_cap(
    model_host: ModelHost, session: aiohttp.ClientSession, make_gguf: GGUFFactory, tmp_path: Path
) -> None:
    model_host.files["big.gguf"] = make_gguf(
        vocabulary=4_000, token_length=140, tensor_shape=(1024, 1024)
    ).read_bytes()
    capped = HeaderReadOptions(initial_bytes=128 * KIB, max_bytes=256 * KIB, temp_dir=str(tmp_path))
    result = await read_remote_gguf_metadata(
        session, model_host.url("/ranged/big.gguf"), capped, policy=loopback_allowed
    )
    assert result.failure is HeaderFailure.HEADER_TOO_LARGE
    assert result.bytes_fetched == model_host.body_bytes_sent == 256 * KIB


async def test_slow_server_hits_the_deadline(
    model_host: ModelHost, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    hurried = HeaderReadOptions(deadline_seconds=0.2, temp_dir=str(tmp_path))
    result = await read_remote_gguf_metadata(
        session, model_host.url("/slow"), hurried, policy=loopback_allowed
    )
    assert result.failure is HeaderFailure.TIMEOUT
    assert os.listdir(tmp_path) == []


async def test_nobody_listening(session: aiohttp.ClientSession, options: HeaderReadOptions) -> None:
    result = await read_remote_gguf_metadata(
        session, "http://127.0.0.1:1/m.gguf", options, policy=loopback_allowed
    )
    assert result.failure is HeaderFailure.CONNECTION


async def test_unusable_temp_directory(session: aiohttp.ClientSession, tmp_path: Path) -> None:
    options = HeaderReadOptions(temp_dir=str(tmp_path / "absent"))
    result = await read_remote_gguf_metadata(
        session, "http://127.0.0.1:1/m.gguf", options, policy=loopback_allowed
    )
    assert result.failure is HeaderFailure.IO_ERROR


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("bytes 0-262143/4939212390", (0, 262143, 4939212390)),
        ("bytes 10-20/*", (10, 20, None)),
        (" bytes 1-1/2 ", (1, 1, 2)),
        ("bytes */100", None),  # the 416 form
        ("items 0-1/2", None),
        (None, None),
    ],
)
def test_parse_content_range(value: str | None, parsed: tuple[int, int, int | None] | None) -> None:
    assert parse_content_range(value) == parsed


async def test_a_total_no_file_has_is_an_invalid_answer(
    model_host: ModelHost, session: aiohttp.ClientSession, make_gguf: GGUFFactory, options: HeaderReadOptions
) -> None:
    """`Content-Range: bytes 0-262143/10^30`: an invalid answer, after one request (the old reader
    raised OverflowError making a sparse file that long, and every retry fetched again)."""
    model_host.files["m.gguf"] = make_gguf(vocabulary=2_000, token_length=140).read_bytes()
    result = await read_remote_gguf_metadata(
        session, model_host.url("/lying-total/m.gguf"), options, policy=loopback_allowed
    )
    assert result.failure is HeaderFailure.INVALID_RESPONSE
    assert f"Content-Range 'bytes 0-262143/{10**30}'" in result.detail
    assert model_host.range_requests == [(0, 256 * KIB - 1)]
    assert os.listdir(options.temp_dir or "") == []


@pytest.mark.parametrize(
    "value",
    ["bytes 0-10/" + "9" * 5000, "bytes 0-99999999999999999999/100", "bytes 5-10/100", "bytes 10-5/100"],
)
def test_content_ranges_no_file_has_are_refused(value: str) -> None:
    from llmkube.controllers.modelsource.remoteheader import _Unavailable, checked_range

    with pytest.raises(_Unavailable) as refused:
        checked_range(value, 0, 262143)
    assert refused.value.kind is HeaderFailure.INVALID_RESPONSE


async def test_more_than_was_asked_for_is_never_read(
    model_host: ModelHost, session: aiohttp.ClientSession, make_gguf: GGUFFactory, options: HeaderReadOptions
) -> None:
    path = make_gguf(name="Generous", tensor_shape=(1024, 1024))  # 4 MiB of tensor data after the header
    model_host.files["g.gguf"] = path.read_bytes()
    result = await read_remote_gguf_metadata(
        session, model_host.url("/generous/g.gguf"), options, policy=loopback_allowed
    )
    assert result.metadata is not None and result.metadata.model_name == "Generous"
    assert result.bytes_fetched == 256 * KIB  # what was asked for, not the 4 MiB the server sent


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_hostile_headers_over_http(
    model_host: ModelHost, session: aiohttp.ClientSession, options: HeaderReadOptions, name: str
) -> None:
    """Each is read once, into metadata the API server stores or a typed refusal; never raises."""
    model_host.files["h.gguf"] = HOSTILE[name]
    result = await read_remote_gguf_metadata(
        session, model_host.url("/ranged/h.gguf"), options, policy=loopback_allowed
    )
    if result.metadata is None:
        assert result.failure is HeaderFailure.NOT_GGUF, result
    else:
        assert all(len(v) <= 300 for v in result.metadata.model_dump().values() if isinstance(v, str))
        assert all(v <= 2**63 - 1 for v in result.metadata.model_dump().values() if isinstance(v, int))
    # one growing prefix, never the same bytes twice
    starts = [start for start, _ in model_host.range_requests]
    assert starts == sorted(set(starts))
    assert model_host.body_bytes_sent <= len(HOSTILE[name])
