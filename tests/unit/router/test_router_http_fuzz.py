"""Fuzzing the router's HTTP parser (the server's `data_received`): arbitrary bytes, mutations of
real and hostile requests, in arbitrary pieces. hypothesis here, atheris (coverage-guided, in a
process of its own) for a few thousand runs; the invariants are in server_fuzzing.py."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.router.server_fuzzing import run, split

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
SEEDS = [
    b"GET / HTTP/1.1\r\nHost: r\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n",
    b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;ext=" + b"e" * 2000 + b"\r\na\r\n0\r\n\r\n",
    b"GET / HTTP/1.1\r\nX: " + b"v" * 3000 + b"\r\n\r\n",
    b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nX: " + b"v" * 1500 + b"\r\n\r\n",
    b"POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
    b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    b"POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 99999\r\n\r\n",
    b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"T: x\r\n" * 400 + b"\r\n",
]


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)) * draw(st.integers(1, 3)))
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, max(0, len(data) - 1)))
        kind = draw(st.sampled_from(["byte", "cut", "insert", "repeat"]))
        if kind == "byte" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(max_size=64))
        else:
            data[at:at] = data[at : at + 8] * draw(st.integers(1, 400))
    return bytes(data)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.one_of(requests(), st.binary(max_size=4096)), cuts=st.lists(st.integers(0, 1 << 16), max_size=40)
)
def test_the_server_survives_any_bytes_in_any_pieces(data: bytes, cuts: list[int]) -> None:
    run(split(data, cuts))


def test_atheris_finds_no_crash(tmp_path: Path) -> None:
    pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris)")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index, seed in enumerate(SEEDS):
        (corpus / f"seed-{index}").write_bytes(bytes([7]) + seed)
    result = subprocess.run(
        [
            sys.executable,
            str(HERE / "fuzz_http_server.py"),
            str(corpus),
            "-runs=3000",
            "-max_len=8192",
            "-seed=1",
            "-rss_limit_mb=1024",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    done = re.search(r"^Done (\d+) runs", result.stderr, re.MULTILINE)
    assert done is not None and int(done.group(1)) >= 3000, result.stderr[-3000:]
