import os
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llmkube_testing.llama_gguf import Shape, TensorType, write_llama_gguf
from modelsource_support import GGUFFactory

from llmkube.api.model import GGUFMetadata
from llmkube.plan.model.gguf_metadata import TENSOR_BYTES_FIELD, TOKEN_COUNT_FIELD
from llmkube.sources import (
    IncompleteHeaderError,
    NotGGUFError,
    read_gguf_metadata,
    read_gguf_metadata_or_none,
)
from llmkube.sources.ggufheader import GGML_BLOCK_SIZES, read_gguf_fields


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
        tensor_bytes=8 * 16 * 4,  # the one float32 tensor
        tensor_count=1,
        file_version=3,
        license="apache-2.0",
    )


def test_reads_what_the_memory_fit_estimate_needs(make_gguf: GGUFFactory, tmp_path: Path) -> None:
    """KV heads and head sizes from the header, the vocabulary's size from the tokenizer array's
    index (never converted), and the weights' bytes from the tensor infos."""
    path = tmp_path / "shaped.gguf"
    shape = Shape(embedding=64, layers=2, heads=4, kv_heads=2, feed_forward=128, vocab=300, type="f16")
    write_llama_gguf(path, shape)
    metadata = read_gguf_metadata(str(path))
    assert (metadata.head_count, metadata.head_count_kv, metadata.vocab_size) == (4, 2, 300)
    assert (metadata.key_length, metadata.value_length) == (None, None)  # the header leaves them out
    embedding, kv_width, ffn, vocab, f16, f32 = 64, 2 * 16, 128, 300, 2, 4
    per_layer = 2 * embedding * f32 + (2 * embedding * embedding + 2 * kv_width * embedding) * f16
    per_layer += 3 * ffn * embedding * f16
    expected = 2 * vocab * embedding * f16 + 2 * per_layer + embedding * f32
    assert metadata.tensor_bytes == expected
    big_vocabulary = read_gguf_metadata(str(make_gguf(vocabulary=5000)))
    assert big_vocabulary.vocab_size == 5000


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


# -- the reader agrees with the gguf package's own GGUFReader -----------------------------------

_SCALAR_WRITERS = {
    gguf.GGUFValueType.UINT8: st.integers(0, 2**8 - 1),
    gguf.GGUFValueType.INT8: st.integers(-(2**7), 2**7 - 1),
    gguf.GGUFValueType.UINT16: st.integers(0, 2**16 - 1),
    gguf.GGUFValueType.INT16: st.integers(-(2**15), 2**15 - 1),
    gguf.GGUFValueType.UINT32: st.integers(0, 2**32 - 1),
    gguf.GGUFValueType.INT32: st.integers(-(2**31), 2**31 - 1),
    gguf.GGUFValueType.UINT64: st.integers(0, 2**64 - 1),
    gguf.GGUFValueType.INT64: st.integers(-(2**63), 2**63 - 1),
    gguf.GGUFValueType.FLOAT32: st.floats(width=32, allow_nan=False),
    gguf.GGUFValueType.FLOAT64: st.floats(allow_nan=False),
    gguf.GGUFValueType.BOOL: st.booleans(),
    gguf.GGUFValueType.STRING: st.text(max_size=40),
}
_int32 = st.integers(-(2**31), 2**31 - 1)
_key_values = st.dictionaries(
    st.text("abcdefghijklmnopqrstuvwxyz._", min_size=1, max_size=24),
    st.one_of(
        *(st.tuples(st.just(kind), values) for kind, values in _SCALAR_WRITERS.items()),
        st.tuples(st.just("array-of-strings"), st.lists(st.text(max_size=12), min_size=1, max_size=30)),
        st.tuples(
            st.just("array-of-int32"), st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=30)
        ),
        st.tuples(
            st.just("array-of-arrays"),
            st.lists(st.lists(st.integers(0, 255), min_size=1, max_size=4), min_size=1, max_size=4),
        ),
    ),
    max_size=12,
)


def _write_random_gguf(
    path: Path, key_values: dict[str, tuple[object, object]], tensors: int, alignment: int | None
) -> None:
    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    for key, (kind, value) in key_values.items():
        if key in ("general.architecture", "general.alignment"):
            continue
        if kind == "array-of-strings" or kind == "array-of-arrays":
            writer.add_array(key, value)  # type: ignore[arg-type]
        elif kind == "array-of-int32":
            writer.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
        else:
            writer.add_key_value(key, value, kind)  # type: ignore[arg-type]
    for index in range(tensors):
        writer.add_tensor(f"t{index}", np.arange(3 + index, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key_values=_key_values,
    tensors=st.integers(0, 3),
    alignment=st.sampled_from([None, 8, 64, 256]),
)
def test_reads_what_the_gguf_package_reads(
    tmp_path: Path, key_values: dict[str, tuple[object, object]], tensors: int, alignment: int | None
) -> None:
    """Every scalar key/value and the data offset, on files the gguf package writes, equal what
    its own GGUFReader reads (arrays are skipped by ours, and so left out of the comparison)."""
    path = tmp_path / "random.gguf"
    _write_random_gguf(path, key_values, tensors, alignment)
    reference = gguf.GGUFReader(str(path))
    expected = {
        name: field.contents()
        for name, field in reference.fields.items()
        if field.types and field.types[0] is not gguf.GGUFValueType.ARRAY
    }
    expected[TENSOR_BYTES_FIELD] = sum(int(tensor.n_bytes) for tensor in reference.tensors)
    if "tokenizer.ggml.tokens" in reference.fields:
        expected[TOKEN_COUNT_FIELD] = len(reference.fields["tokenizer.ggml.tokens"].data)
    data_offset, fields = read_gguf_fields(str(path))
    assert fields == expected
    assert data_offset == reference.data_offset


def test_the_tensor_type_sizes_are_the_gguf_packages() -> None:
    """The weights' bytes come from our table of ggml block sizes: it must be gguf's, type by type."""
    assert {kind.value: size for kind, size in gguf.GGML_QUANT_SIZES.items()} == GGML_BLOCK_SIZES


@pytest.mark.parametrize("kind", ["f32", "f16", "q8_0"])
def test_the_weights_bytes_are_what_the_gguf_package_counts(tmp_path: Path, kind: TensorType) -> None:
    path = tmp_path / f"{kind}.gguf"
    shape = Shape(embedding=64, layers=2, heads=4, kv_heads=2, feed_forward=128, vocab=300, type=kind)
    write_llama_gguf(path, shape)
    reference = gguf.GGUFReader(str(path))
    _, fields = read_gguf_fields(str(path))
    assert fields[TENSOR_BYTES_FIELD] == sum(int(tensor.n_bytes) for tensor in reference.tensors)
    assert fields[TOKEN_COUNT_FIELD] == 300


def test_reads_a_big_endian_file(tmp_path: Path) -> None:
    path = tmp_path / "be.gguf"
    writer = gguf.GGUFWriter(str(path), "llama", endianess=gguf.GGUFEndian.BIG)
    writer.add_context_length(2048)
    writer.add_name("big")
    writer.add_tensor("t", np.arange(4, dtype=np.float32).byteswap())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    reference = gguf.GGUFReader(str(path))
    data_offset, fields = read_gguf_fields(str(path))
    assert (fields["llama.context_length"], fields["general.name"], fields["GGUF.version"]) == (
        2048,
        "big",
        3,
    )
    assert data_offset == reference.data_offset


def test_an_absurd_array_length_is_refused_without_looping(tmp_path: Path) -> None:
    """A corrupt count (2**62 strings) would loop for ever; the reader checks it against the file."""
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
    key = b"tokenizer.ggml.tokens"
    body = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, 2**62)
    path = tmp_path / "absurd.gguf"
    path.write_bytes(header + body + b"\0" * 64)
    with pytest.raises(NotGGUFError, match="does not fit"):
        read_gguf_metadata(str(path))
