"""GGUF header -> `status.gguf`: a small reader of the header's key/values, no numpy.

The controller needs the scalar key/values (architecture, name, file type, context length, ...)
and where the header ends (`data_offset`). The GGUF header is a plain sequence: magic, version,
tensor count, key/value count, the key/values, the tensor infos, then padding to the alignment.
This reader walks it with `struct` over a memory map, reads only the scalars, and skips arrays
(a 150k-token vocabulary) by their lengths without decoding them. It replaced the `gguf`
package's GGUFReader in the controller: that one needs numpy (70 MB in the image, 30 MB of
resident memory) and takes seconds on a large vocabulary. The tests check both agree on files
written by the `gguf` package itself.

It also accepts a *sparse* file whose first `valid_bytes` are real and whose tail is a hole: that
is how the first bytes of a remote file are parsed without fetching it. Any read past the real
bytes means the header does not fit in them (IncompleteHeaderError).
"""

import mmap
import os
import struct
from typing import Final

from llmkube.api.model import GGUFMetadata
from llmkube.plan.model import gguf_metadata_from_fields
from llmkube.plan.model.gguf_metadata import TENSOR_BYTES_FIELD, TOKEN_COUNT_FIELD

GGUF_MAGIC: Final = b"GGUF"
SUPPORTED_VERSIONS: Final = (2, 3)
DEFAULT_ALIGNMENT: Final = 32

# GGUF value types (gguf.GGUFValueType), as struct formats; STRING (8) and ARRAY (9) are read apart.
_STRING, _ARRAY = 8, 9
_SCALARS: Final = {
    0: "B",  # UINT8
    1: "b",  # INT8
    2: "H",  # UINT16
    3: "h",  # INT16
    4: "I",  # UINT32
    5: "i",  # INT32
    6: "f",  # FLOAT32
    7: "?",  # BOOL
    10: "Q",  # UINT64
    11: "q",  # INT64
    12: "d",  # FLOAT64
}


class HeaderError(Exception):
    """The file's header could not be turned into metadata."""


class NotGGUFError(HeaderError):
    pass


class IncompleteHeaderError(HeaderError):
    """The header runs past the bytes known to be real: fetch a longer prefix."""


class _Cursor:
    """Reads forward through `buffer`; `real` bytes are known, the file has `size`."""

    def __init__(self, buffer: bytes | mmap.mmap, real: int, size: int, order: str) -> None:
        self.buffer, self.real, self.size, self.order = buffer, real, size, order
        self.position = 0

    def _claim(self, length: int) -> int:
        start, end = self.position, self.position + length
        if length < 0 or end > self.size:
            raise NotGGUFError(f"header runs past the end of the file ({end} > {self.size} bytes)")
        if end > self.real:
            raise IncompleteHeaderError(f"header needs more than the {self.real} bytes available")
        self.position = end
        return start

    def unpack(self, fmt: str) -> object:
        code = self.order + fmt
        return struct.unpack_from(code, self.buffer, self._claim(struct.calcsize(code)))[0]

    def count(self) -> int:
        value = self.unpack("Q")
        assert isinstance(value, int)
        return value

    def string(self) -> str:
        length = self.count()
        start = self._claim(length)
        return bytes(self.buffer[start : start + length]).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self._claim(self.count())

    def remaining(self) -> int:
        return self.size - self.position


def _value_type(cursor: _Cursor) -> int:
    kind = cursor.unpack("I")
    assert isinstance(kind, int)
    if kind not in _SCALARS and kind not in (_STRING, _ARRAY):
        raise NotGGUFError(f"unknown value type {kind} at byte {cursor.position - 4}")
    return kind


# ggml tensor types: (elements per block, bytes per block), as gguf.GGML_QUANT_SIZES has them (a
# test holds the two equal). The weights' bytes feed the memory-fit estimate; a tensor of a type
# not listed here (one newer than this table) leaves the total unknown rather than wrong.
GGML_BLOCK_SIZES: Final[dict[int, tuple[int, int]]] = {
    0: (1, 4),  # F32
    1: (1, 2),  # F16
    2: (32, 18),  # Q4_0
    3: (32, 20),  # Q4_1
    6: (32, 22),  # Q5_0
    7: (32, 24),  # Q5_1
    8: (32, 34),  # Q8_0
    9: (32, 40),  # Q8_1
    10: (256, 84),  # Q2_K
    11: (256, 110),  # Q3_K
    12: (256, 144),  # Q4_K
    13: (256, 176),  # Q5_K
    14: (256, 210),  # Q6_K
    15: (256, 292),  # Q8_K
    16: (256, 66),  # IQ2_XXS
    17: (256, 74),  # IQ2_XS
    18: (256, 98),  # IQ3_XXS
    19: (256, 50),  # IQ1_S
    20: (32, 18),  # IQ4_NL
    21: (256, 110),  # IQ3_S
    22: (256, 82),  # IQ2_S
    23: (256, 136),  # IQ4_XS
    24: (1, 1),  # I8
    25: (1, 2),  # I16
    26: (1, 4),  # I32
    27: (1, 8),  # I64
    28: (1, 8),  # F64
    29: (256, 56),  # IQ1_M
    30: (1, 2),  # BF16
    34: (256, 54),  # TQ1_0
    35: (256, 66),  # TQ2_0
    39: (32, 17),  # MXFP4
    40: (64, 36),  # NVFP4
    41: (128, 18),  # Q1_0
}


def _tensor_bytes(shape: list[int], ggml_type: int) -> int | None:
    block = GGML_BLOCK_SIZES.get(ggml_type)
    if block is None:
        return None
    elements = 1
    for extent in shape:
        elements *= extent
    return elements // block[0] * block[1]


def _skip_array(cursor: _Cursor) -> int:
    """Skips the array under the cursor; returns its length."""
    item = _value_type(cursor)
    count = cursor.count()
    # A count the file cannot hold is corrupt: refuse it before looping over it.
    smallest = 8 if item == _STRING else 12 if item == _ARRAY else struct.calcsize(_SCALARS[item])
    if count * smallest > cursor.remaining():
        raise NotGGUFError(f"array of {count} items does not fit in the file")
    if item in _SCALARS:
        cursor._claim(count * struct.calcsize(_SCALARS[item]))
    elif item == _STRING:
        for _ in range(count):
            cursor.skip_string()
    else:
        for _ in range(count):
            _skip_array(cursor)
    return count


def _read_header(cursor: _Cursor) -> tuple[int, int, dict[str, object]]:
    """(version, data_offset, scalar key/values) of the header under the cursor (after the magic)."""
    version = cursor.unpack("I")
    assert isinstance(version, int)
    if version & 0xFFFF == 0:  # written on a big-endian machine: every number is byte-swapped
        cursor.order = ">" if cursor.order == "<" else "<"
        version = int.from_bytes(version.to_bytes(4, "little"), "big")
    if version not in SUPPORTED_VERSIONS:
        raise NotGGUFError(f"GGUF version {version} is not supported (only {SUPPORTED_VERSIONS})")
    tensor_count, kv_count = cursor.count(), cursor.count()
    fields: dict[str, object] = {}
    for _ in range(kv_count):
        key = cursor.string()
        kind = _value_type(cursor)
        if kind == _ARRAY:  # arrays (vocabularies, scores) are skipped: only one length is needed
            length = _skip_array(cursor)
            if key == "tokenizer.ggml.tokens":
                fields[TOKEN_COUNT_FIELD] = length
        elif kind == _STRING:
            fields[key] = cursor.string()
        else:
            fields[key] = cursor.unpack(_SCALARS[kind])
    if tensor_count * 24 > cursor.remaining():  # name length, dims count, type, offset at least
        raise NotGGUFError(f"{tensor_count} tensor infos do not fit in the file")
    weights: int | None = 0
    for _ in range(tensor_count):
        cursor.skip_string()  # name
        dimensions = cursor.unpack("I")
        assert isinstance(dimensions, int)
        if dimensions * 8 > cursor.remaining():
            raise NotGGUFError(f"a tensor of {dimensions} dimensions does not fit in the file")
        shape = [cursor.count() for _ in range(dimensions)]  # uint64 extents
        ggml_type = cursor.unpack("I")
        assert isinstance(ggml_type, int)
        cursor._claim(8)  # offset
        size = _tensor_bytes(shape, ggml_type)
        weights = None if weights is None or size is None else weights + size
    if weights is not None:
        fields[TENSOR_BYTES_FIELD] = weights
    alignment = fields.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0:
        raise NotGGUFError(f"invalid general.alignment {alignment!r}")
    data_offset = -(-cursor.position // alignment) * alignment
    header = {"GGUF.version": version, "GGUF.tensor_count": tensor_count, "GGUF.kv_count": kv_count}
    return version, data_offset, {**fields, **header}


def read_gguf_fields(path: str, *, valid_bytes: int | None = None) -> tuple[int, dict[str, object]]:
    """(data_offset, scalar key/values) of the GGUF file at `path` (blocking). The key/values
    include the header's own `GGUF.version`, `GGUF.tensor_count` and `GGUF.kv_count`, named as the
    gguf package names them.
    Raises NotGGUFError, IncompleteHeaderError, or OSError for I/O failures."""
    size = os.path.getsize(path)
    real = size if valid_bytes is None else min(valid_bytes, size)
    with open(path, "rb") as file:
        magic = file.read(len(GGUF_MAGIC))
        if real < len(GGUF_MAGIC) and real < size:
            raise IncompleteHeaderError(f"only {real} bytes available")
        if magic != GGUF_MAGIC:
            raise NotGGUFError(f"not a GGUF file (magic {magic!r})")
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            cursor = _Cursor(mapped, real, size, "<")
            cursor.position = len(GGUF_MAGIC)
            _, data_offset, fields = _read_header(cursor)
    if data_offset > real and real < size:
        raise IncompleteHeaderError(f"header needs {data_offset} bytes, have {real}")
    return data_offset, fields


def read_gguf_metadata(path: str, *, valid_bytes: int | None = None) -> GGUFMetadata:
    """Parse the header of the GGUF file at `path` (blocking: call it through llmkube.kube.blocking).

    `valid_bytes`: only this many leading bytes are real (the rest is a zero-filled hole); the
    result is trusted only when the whole header (everything before the tensor data) lies within
    them. Raises NotGGUFError, IncompleteHeaderError, or OSError for I/O failures.
    """
    _, fields = read_gguf_fields(path, valid_bytes=valid_bytes)
    return gguf_metadata_from_fields(fields)


def read_gguf_metadata_or_none(path: str) -> GGUFMetadata | None:
    """Metadata is informational: a file that is not GGUF (or unreadable) simply has none."""
    try:
        return read_gguf_metadata(path)
    except (HeaderError, OSError):
        return None
