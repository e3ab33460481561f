"""Fuzzing the GGUF header reader: whatever bytes a source serves, the reader either gives metadata
the API server stores or raises HeaderError; never another exception, never for long.

Two fuzzers: hypothesis (mutations of real and hostile headers, and headers built from random
counts, types and lengths over the whole uint64 range), and atheris (coverage-guided, in a process
of its own: libFuzzer owns the process it runs in), each for a few seconds."""

import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llmkube_testing.hostile_gguf import ARRAY, HOSTILE, STRING, UINT64, gguf_file, ordinary, plain, string

from llmkube.plan.model import gguf_metadata_from_fields
from llmkube.plan.model.bounds import INT64_MAX, MAX_GGUF_TEXT
from llmkube.sources.ggufheader import HeaderError, read_gguf_fields

HERE = Path(__file__).parent
#: Seeds small enough to mutate quickly: the hostile headers of a few KiB, and an ordinary one.
SEEDS = [ordinary(), *(data for data in HOSTILE.values() if len(data) < 64 * 1024)]


def check(path: Path, data: bytes, valid: int | None, size: int | None) -> None:
    path.write_bytes(data)
    started = time.process_time()
    try:
        _, fields = read_gguf_fields(str(path), valid_bytes=valid, file_size=size)
    except HeaderError:
        return
    finally:
        assert time.process_time() - started < 2.0
    metadata = gguf_metadata_from_fields(fields)
    for value in metadata.model_dump().values():
        if isinstance(value, int):
            assert 0 <= value <= INT64_MAX
        elif isinstance(value, str):
            assert len(value) <= MAX_GGUF_TEXT + 40


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, max(0, len(data) - 1)))
        kind = draw(st.sampled_from(["byte", "u64", "cut", "insert"]))
        if kind == "byte" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "u64":
            data[at : at + 8] = struct.pack("<Q", draw(st.integers(0, 2**64 - 1)))
        elif kind == "cut":
            del data[at:]
        else:
            data[at:at] = draw(st.binary(max_size=64))
    return bytes(data)


@st.composite
def built(draw: st.DrawFn) -> bytes:
    """Key/values of random types with random (often absurd) counts and lengths."""
    items = []
    for index in range(draw(st.integers(0, 6))):
        key = f"k{index}"
        kind = draw(st.sampled_from(["u64", "string", "array", "nested"]))
        big = st.one_of(st.integers(0, 64), st.integers(0, 2**64 - 1))
        if kind == "u64":
            items.append(string(key) + struct.pack("<IQ", UINT64, draw(st.integers(0, 2**64 - 1))))
        elif kind == "string":
            items.append(string(key) + struct.pack("<IQ", STRING, draw(big)) + draw(st.binary(max_size=32)))
        elif kind == "array":
            item = draw(st.integers(0, 13))
            items.append(
                string(key) + struct.pack("<IIQ", ARRAY, item, draw(big)) + draw(st.binary(max_size=64))
            )
        else:
            depth = draw(st.integers(1, 40))
            items.append(
                string(key) + struct.pack("<IIQ", ARRAY, ARRAY, 1) * depth + struct.pack("<IQ", 0, 1) + b"\1"
            )
    kv_count = draw(st.one_of(st.none(), st.integers(0, 2**64 - 1)))
    tensor_count = draw(st.one_of(st.none(), st.integers(0, 2**64 - 1)))
    return gguf_file([*plain(), *items], kv_count=kv_count, tensor_count=tensor_count, data=b"")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.one_of(mutated(), built()),
    valid=st.one_of(st.none(), st.integers(0, 1 << 20)),
    size=st.one_of(st.none(), st.integers(0, INT64_MAX)),
)
def test_the_reader_survives_any_header(
    tmp_path: Path, data: bytes, valid: int | None, size: int | None
) -> None:
    check(tmp_path / "fuzzed.gguf", data, valid, size)


def test_atheris_finds_no_crash(tmp_path: Path) -> None:
    pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris)")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index, seed in enumerate(SEEDS):
        (corpus / f"seed-{index}").write_bytes(seed)
    result = subprocess.run(
        [
            sys.executable,
            str(HERE / "fuzz_gguf_header.py"),
            str(corpus),
            "-runs=2000",
            "-max_len=16384",
            "-seed=1",
            "-rss_limit_mb=1024",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FUZZ_SCRATCH": str(tmp_path / "scratch.gguf")},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # libFuzzer counts the runs it made when it stops, which can pass -runs by the corpus it reloaded
    # ("Done 2014 runs"): at least the runs asked for, none failed.
    done = re.search(r"^Done (\d+) runs", result.stderr, re.MULTILINE)
    assert done is not None and int(done.group(1)) >= 2000, result.stderr[-3000:]
