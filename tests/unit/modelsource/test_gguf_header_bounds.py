"""The GGUF reader on headers a hostile source serves (llmkube_testing.hostile_gguf): every one is
either refused with NotGGUFError or read into metadata whose every value the API server stores,
quickly, without recursion, and without holding the megabytes it was sent."""

import struct
import time
import tracemalloc
from pathlib import Path

import pytest
from llmkube_testing.hostile_gguf import (
    HOSTILE,
    MIB,
    STRING,
    gguf_file,
    kv_string,
    kv_uint32,
    nested_arrays,
    ordinary,
    plain,
    string,
    tensor_info,
)

from llmkube.api.model import GGUFMetadata
from llmkube.plan.model.bounds import INT64_MAX, MAX_GGUF_TEXT, TRUNCATION_MARKER
from llmkube.sources.ggufheader import (
    MAX_HEADER_BYTES,
    HeaderTooLargeError,
    IncompleteHeaderError,
    NotGGUFError,
    read_gguf_fields,
    read_gguf_metadata,
)

#: what each hostile header must come to: refused (with these words), or metadata
REFUSED = {
    "kv-count-max": "18446744073709551615 key/values",
    "tensor-count-max": "18446744073709551615 tensor infos",
    "array-count-max": "an array of 18446744073709551615 items",
    "string-length-max": "runs past the end of the file",
    "arrays-5000-deep": "arrays nested more than 8 deep",
    "key-70000-bytes": "a key of 70000 bytes",
    "tensor-5-dims": "a tensor of 5 dimensions",
    "tensor-shape-overflow": "more elements than an int64 holds",
    "alignment-3": "invalid general.alignment 3",
}
READ = {"name-2mib", "name-4mib", "context-length-max"}


def test_the_table_covers_every_hostile_header() -> None:
    assert set(REFUSED) | READ == set(HOSTILE)


def written(tmp_path: Path, data: bytes, name: str = "x.gguf") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def storable(metadata: GGUFMetadata) -> None:
    """Every value is one the API server stores and the field can mean."""
    for value in metadata.model_dump().values():
        if isinstance(value, int):
            assert 0 <= value <= INT64_MAX
        if isinstance(value, str):
            assert len(value) <= MAX_GGUF_TEXT + 40


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_hostile_header_is_refused(tmp_path: Path, name: str) -> None:
    path = written(tmp_path, HOSTILE[name])
    started = time.process_time()
    with pytest.raises(NotGGUFError, match=REFUSED[name]):
        read_gguf_metadata(path)
    assert time.process_time() - started < 1.0  # refused before any loop over the counts


@pytest.mark.parametrize(("name", "length"), [("name-2mib", 2 * MIB), ("name-4mib", 4 * MIB)])
def test_a_huge_name_is_cut_with_a_marker_and_never_held(tmp_path: Path, name: str, length: int) -> None:
    path = written(tmp_path, HOSTILE[name])
    tracemalloc.start()
    try:
        metadata = read_gguf_metadata(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert metadata.model_name == "N" * MAX_GGUF_TEXT + f"{TRUNCATION_MARKER}, {length} bytes]"
    assert (metadata.architecture, metadata.context_length) == ("llama", 4096)  # the rest is read
    storable(metadata)
    assert peak < 256 * 1024  # the reader never copied the megabytes it skipped


def test_numbers_no_field_can_mean_are_left_out(tmp_path: Path) -> None:
    """A context length and a layer count of 2^64-1: unset, not sent to be refused as int64."""
    metadata = read_gguf_metadata(written(tmp_path, HOSTILE["context-length-max"]))
    assert (metadata.context_length, metadata.layer_count) == (None, None)
    assert (metadata.architecture, metadata.model_name) == ("llama", "Tiny Llama")
    storable(metadata)


def test_nesting_is_refused_without_recursion(tmp_path: Path) -> None:
    # Far deeper than Python's recursion limit: the old recursive reader died of RecursionError.
    path = written(tmp_path, gguf_file([*plain(), nested_arrays("x", 100_000)]))
    with pytest.raises(NotGGUFError, match="nested more than 8"):
        read_gguf_metadata(path)
    allowed = written(tmp_path, gguf_file([*plain(), nested_arrays("x", 8)]), "ok.gguf")
    assert read_gguf_metadata(allowed).model_name == "Tiny Llama"


def test_a_header_past_the_limit_is_too_large_whatever_the_file_holds(tmp_path: Path) -> None:
    """A 40 MiB string inside a file that has the bytes: more than any header, never read."""
    data = gguf_file([*plain(), kv_string("tokenizer.chat_template", "x" * (40 * MIB))])
    with pytest.raises(HeaderTooLargeError, match=f"past the first {MAX_HEADER_BYTES} bytes"):
        read_gguf_metadata(written(tmp_path, data))


def test_a_prefix_of_a_huge_file_says_too_large_not_incomplete(tmp_path: Path) -> None:
    """The first bytes of a file announced as 1 TB, whose header claims a 1 GiB string: the reader
    says the header is too large at once, instead of asking for ever more bytes."""
    claim = gguf_file([string("x") + struct.pack("<IQ", STRING, 2**30)], data=b"")
    path = written(tmp_path, claim)
    with pytest.raises(HeaderTooLargeError):
        read_gguf_fields(path, valid_bytes=len(claim), file_size=10**12)
    # ... while a header that merely goes on past the bytes at hand asks for more.
    prefix = written(tmp_path, ordinary()[:64], "prefix.gguf")
    with pytest.raises(IncompleteHeaderError):
        read_gguf_fields(prefix, valid_bytes=64, file_size=10**12)


def test_long_keys_and_many_key_values_are_parsed_but_not_kept(tmp_path: Path) -> None:
    long_key = "k" * 1000  # within GGUF's 65535, beyond what is kept
    many = [kv_uint32(f"x.key{i}", i) for i in range(2000)]
    _, fields = read_gguf_fields(written(tmp_path, gguf_file([*plain(), kv_uint32(long_key, 1), *many])))
    assert long_key not in fields
    # the kept key/values, the header's own three counts and the tensor bytes it derives
    assert len(fields) == 512 + 4
    assert fields["general.name"] == "Tiny Llama"


def test_tensor_data_beyond_an_int64_is_left_out(tmp_path: Path) -> None:
    """Each tensor fits an int64, their sum does not: tensorBytes stays unset."""
    tensors = [tensor_info(f"t{i}", [2**31, 2**31], ggml_type=0) for i in range(4)]  # 4 x 2^64 bytes
    metadata = read_gguf_metadata(written(tmp_path, gguf_file(plain(), tensors)))
    assert metadata.tensor_bytes is None
    assert metadata.tensor_count == 4
