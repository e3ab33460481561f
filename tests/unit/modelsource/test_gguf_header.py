import os
from pathlib import Path

import gguf
import pytest
from modelsource_support import GGUFFactory

from llmkube.api.model import GGUFMetadata
from llmkube.controllers.modelsource import (
    IncompleteHeaderError,
    NotGGUFError,
    read_gguf_metadata,
    read_gguf_metadata_or_none,
)
from llmkube.controllers.modelsource.ggufreader import FAST_READER_ACTIVE, _ArrayBackedReader


def test_reads_every_status_field(make_gguf: GGUFFactory) -> None:
    path = make_gguf(
        name="Tiny Llama 1B", file_type=18, context_length=8192, license_text="Apache License 2.0"
    )
    assert read_gguf_metadata(str(path)) == GGUFMetadata(
        architecture="llama",
        model_name="Tiny Llama 1B",
        quantization="Q6_K",
        context_length=8192,
        embedding_size=16,
        layer_count=2,
        head_count=4,
        tensor_count=1,
        file_version=3,
        license="apache-2.0",
    )


def test_missing_keys_stay_unset(make_gguf: GGUFFactory) -> None:
    metadata = read_gguf_metadata(str(make_gguf(name=None, license_text=None, architecture="qwen2")))
    assert (metadata.architecture, metadata.model_name, metadata.license) == ("qwen2", None, None)
    assert metadata.context_length == 4096  # found under qwen2.*


def sparse_prefix(source: Path, target: Path, keep: int) -> Path:
    """The first `keep` bytes of `source`, then a hole up to its full size (what a Range read builds)."""
    data = source.read_bytes()
    with open(target, "wb") as file:
        file.write(data[:keep])
        file.truncate(len(data))
    return target


def test_a_prefix_is_trusted_only_when_the_whole_header_is_inside_it(
    make_gguf: GGUFFactory, tmp_path: Path
) -> None:
    full = make_gguf(
        vocabulary=2_000, token_length=140, tensor_shape=(256, 1024)
    )  # ~300 KiB header, 1 MiB of tensor data
    expected = read_gguf_metadata(str(full))
    short = sparse_prefix(full, tmp_path / "short.gguf", 64 * 1024)
    # The zero-filled tail would parse as garbage; the data-offset check refuses it instead.
    with pytest.raises(IncompleteHeaderError):
        read_gguf_metadata(str(short), valid_bytes=64 * 1024)
    enough = sparse_prefix(full, tmp_path / "enough.gguf", 512 * 1024)
    assert read_gguf_metadata(str(enough), valid_bytes=512 * 1024) == expected
    assert os.stat(enough).st_blocks * 512 < full.stat().st_size  # the tail really is a hole


@pytest.mark.parametrize(
    "content",
    [b"", b"GGU", b"PK\x03\x04 a zip file", b"GGUF" + b"\xff" * 60],  # empty, short, foreign, corrupt
)
def test_not_gguf(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(content)
    with pytest.raises(NotGGUFError):
        read_gguf_metadata(str(path))
    assert read_gguf_metadata_or_none(str(path)) is None


def test_truncated_file_is_not_gguf(make_gguf: GGUFFactory, tmp_path: Path) -> None:
    data = make_gguf(vocabulary=2000).read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) // 4])
    assert read_gguf_metadata_or_none(str(cut)) is None


def test_unreadable_path_has_no_metadata(tmp_path: Path) -> None:
    assert read_gguf_metadata_or_none(str(tmp_path / "absent.gguf")) is None


def test_the_fast_reader_is_active_and_reads_exactly_what_the_stock_reader_reads(
    make_gguf: GGUFFactory,
) -> None:
    # If a gguf release changes the private accessor, the fast path switches itself off; this test
    # then fails on purpose so the shim gets reviewed rather than silently dropped.
    assert FAST_READER_ACTIVE
    path = str(make_gguf(vocabulary=3_000, token_length=20))
    stock, fast = gguf.GGUFReader(path), _ArrayBackedReader(path)
    assert fast.data_offset == stock.data_offset
    assert list(fast.fields) == list(stock.fields)
    for name, field in stock.fields.items():
        assert fast.fields[name].contents() == field.contents(), name
    assert [(t.name, t.n_bytes, t.data_offset) for t in fast.tensors] == [
        (t.name, t.n_bytes, t.data_offset) for t in stock.tensors
    ]
