"""GGUF header -> `status.gguf`: a small reader of the header's key/values, no numpy.

The controller needs the scalar key/values (architecture, name, file type, context length, ...)
and where the header ends (`data_offset`). The GGUF header is a plain sequence: magic, version,
tensor count, key/value count, the key/values, the tensor infos, then padding to the alignment.
This reader walks it with `struct` over a memory map, reads only the scalars, and skips arrays
(a 150k-token vocabulary) by their lengths without decoding them. It replaced the `gguf`
package's GGUFReader in the controller: that one needs numpy (70 MB in the image, 30 MB of
resident memory) and takes seconds on a large vocabulary. The tests check both agree on files
written by the `gguf` package itself.

The header is written by whoever owns the model source, who may be hostile: every count is
checked against the bytes that could hold it before anything loops over it, nothing is read past
`MAX_HEADER_BYTES`, keys and kept strings are bounded, arrays of arrays are skipped with a stack
of bounded depth (no recursion), and numbers the API server cannot store are left to the planner
to drop (plan/model/gguf_metadata.py).

It also accepts the first `valid_bytes` of a longer file (of `file_size` bytes): that is how the
first bytes of a remote file are parsed without fetching it. Any read past the real bytes means
the header does not fit in them (IncompleteHeaderError).
"""

import mmap
import os
import struct
from typing import Final

from llmkube.api.model import GGUFMetadata
from llmkube.plan.model import gguf_metadata_from_fields
from llmkube.plan.model.bounds import INT64_MAX, MAX_GGUF_TEXT, prefix_bytes, truncated_bytes
from llmkube.plan.model.gguf_metadata import TENSOR_BYTES_FIELD, TOKEN_COUNT_FIELD

GGUF_MAGIC: Final = b"GGUF"
SUPPORTED_VERSIONS: Final = (2, 3)
DEFAULT_ALIGNMENT: Final = 32

# Bounds on what a header may ask of the reader (a model source's owner writes the header):
#: the whole header, key/values and tensor infos; large-vocabulary models carry 5-15 MiB of
#: tokenizer metadata, and nothing is ever read or fetched past this
MAX_HEADER_BYTES: Final = 32 * 1024 * 1024
#: a key, as the GGUF specification bounds it
MAX_KEY_BYTES: Final = 2**16 - 1
#: keys longer than this are parsed but not kept (real ones are under 100 bytes) ...
MAX_KEPT_KEY_BYTES: Final = 256
#: ... and so are key/values beyond the first this many (real headers have 20 to 60)
MAX_KEPT_FIELDS: Final = 512
#: arrays of arrays (the gguf package writes them; llama.cpp reads none)
MAX_ARRAY_DEPTH: Final = 8
#: a tensor's dimensions (GGML_MAX_DIMS; llama.cpp refuses more)
GGML_MAX_DIMS: Final = 4
# The fewest bytes a key/value (key length, type, one byte of value) and a tensor info (name
# length, dimension count, type, offset) take: a count is checked against them before any loop.
_SMALLEST_KEY_VALUE: Final = 8 + 4 + 1
_SMALLEST_TENSOR_INFO: Final = 8 + 4 + 4 + 8

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


class HeaderTooLargeError(NotGGUFError):
    """The header runs past `limit` bytes: more than any model's header, so never fetched or read."""


class _Cursor:
    """Reads forward through `buffer`; `real` bytes are known, the file has `size`, and nothing past
    `limit` is ever read (or asked for)."""

    def __init__(self, buffer: bytes | mmap.mmap, real: int, size: int, order: str, limit: int) -> None:
        self.buffer, self.real, self.size, self.order, self.limit = buffer, real, size, order, limit
        self.position = 0

    def require(self, length: int, what: str) -> None:
        """Refuse, before reading or looping, `length` more bytes (`what` needs them) that the file
        (or the header's limit) cannot hold."""
        end = self.position + length
        if end > self.size:
            raise NotGGUFError(f"{what}: does not fit in the file ({end} > {self.size} bytes)")
        if end > self.limit:
            raise HeaderTooLargeError(f"{what}: does not fit in a header's {self.limit} bytes ({end})")

    def _claim(self, length: int) -> int:
        start, end = self.position, self.position + length
        if length < 0 or end > self.size:
            raise NotGGUFError(f"header runs past the end of the file ({end} > {self.size} bytes)")
        if end > self.limit:
            raise HeaderTooLargeError(f"header runs past the first {self.limit} bytes")
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

    def raw(self, length: int) -> bytes:
        start = self._claim(length)
        return bytes(self.buffer[start : start + length])

    def text(self, limit: int) -> str:
        """A string value, of which at most the first `limit` characters are decoded (and kept)."""
        length = self.count()
        start = self._claim(length)
        keep = min(length, prefix_bytes(limit))
        return truncated_bytes(bytes(self.buffer[start : start + keep]), length, limit)

    def skip_string(self) -> None:
        self._claim(self.count())


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


def _smallest_item(item: int) -> int:
    """The fewest bytes one array item of type `item` takes (a string: its length; an array: its
    type and count)."""
    return 8 if item == _STRING else 12 if item == _ARRAY else struct.calcsize(_SCALARS[item])


def _skip_items(cursor: _Cursor, item: int, count: int) -> None:
    """Skips `count` items of a scalar or string type."""
    cursor.require(count * _smallest_item(item), f"an array of {count} items")
    if item in _SCALARS:
        cursor._claim(count * struct.calcsize(_SCALARS[item]))
    else:
        for _ in range(count):
            cursor.skip_string()


def _skip_array(cursor: _Cursor) -> int:
    """Skips the array under the cursor, arrays of arrays included, with a stack of its own (no
    recursion: a hostile header nested them 5,000 deep); returns the outer array's length."""
    item, length = _value_type(cursor), cursor.count()
    if item != _ARRAY:
        _skip_items(cursor, item, length)
        return length
    cursor.require(length * _smallest_item(_ARRAY), f"an array of {length} arrays")
    left = [length]  # per level of nesting, the arrays still to skip
    while left:
        if left[-1] == 0:
            left.pop()
            continue
        left[-1] -= 1
        inner, count = _value_type(cursor), cursor.count()
        if inner != _ARRAY:
            _skip_items(cursor, inner, count)
            continue
        if len(left) >= MAX_ARRAY_DEPTH:
            raise NotGGUFError(f"arrays nested more than {MAX_ARRAY_DEPTH} deep")
        cursor.require(count * _smallest_item(_ARRAY), f"an array of {count} arrays")
        left.append(count)
    return length


def _key(cursor: _Cursor) -> str | None:
    """The next key, or None when it is too long to be one we keep (it is skipped, not decoded)."""
    length = cursor.count()
    if length > MAX_KEY_BYTES:
        raise NotGGUFError(f"a key of {length} bytes (GGUF keys have at most {MAX_KEY_BYTES})")
    if length > MAX_KEPT_KEY_BYTES:
        cursor._claim(length)
        return None
    return cursor.raw(length).decode("utf-8", errors="replace")


def _read_key_values(cursor: _Cursor, kv_count: int) -> dict[str, object]:
    fields: dict[str, object] = {}
    for _ in range(kv_count):
        key = _key(cursor)
        kind = _value_type(cursor)
        kept = key if key is not None and len(fields) < MAX_KEPT_FIELDS else None
        if kind == _ARRAY:  # arrays (vocabularies, scores) are skipped: only one length is needed
            length = _skip_array(cursor)
            if key == "tokenizer.ggml.tokens":
                fields[TOKEN_COUNT_FIELD] = length
        elif kind == _STRING:
            if kept is not None:
                fields[kept] = cursor.text(MAX_GGUF_TEXT)
            else:
                cursor.skip_string()
        else:
            value = cursor.unpack(_SCALARS[kind])
            if kept is not None:
                fields[kept] = value
    return fields


def _read_tensor_infos(cursor: _Cursor, tensor_count: int) -> int | None:
    """Walks the tensor infos; returns the bytes of tensor data they describe (None when a type is
    not in GGML_BLOCK_SIZES)."""
    weights: int | None = 0
    for _ in range(tensor_count):
        cursor.skip_string()  # name
        dimensions = cursor.unpack("I")
        assert isinstance(dimensions, int)
        if dimensions > GGML_MAX_DIMS:
            raise NotGGUFError(f"a tensor of {dimensions} dimensions (ggml has at most {GGML_MAX_DIMS})")
        shape = [cursor.count() for _ in range(dimensions)]  # uint64 extents
        elements = 1
        for extent in shape:
            elements *= extent
        if elements > INT64_MAX:  # llama.cpp refuses these too: ggml counts elements in an int64
            raise NotGGUFError(f"a tensor of shape {shape} has more elements than an int64 holds")
        ggml_type = cursor.unpack("I")
        assert isinstance(ggml_type, int)
        cursor._claim(8)  # offset
        size = _tensor_bytes(shape, ggml_type)
        weights = None if weights is None or size is None else weights + size
    return weights


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
    # Counts the file cannot hold are refused before any loop over them (a hostile header said 2^64-1).
    cursor.require(kv_count * _SMALLEST_KEY_VALUE, f"{kv_count} key/values")
    cursor.require(
        kv_count * _SMALLEST_KEY_VALUE + tensor_count * _SMALLEST_TENSOR_INFO,
        f"{kv_count} key/values and {tensor_count} tensor infos",
    )
    fields = _read_key_values(cursor, kv_count)
    weights = _read_tensor_infos(cursor, tensor_count)
    if weights is not None:
        fields[TENSOR_BYTES_FIELD] = weights
    alignment = fields.get("general.alignment", DEFAULT_ALIGNMENT)
    # A power of two, as llama.cpp requires (padding to anything else is not GGUF).
    if (
        not isinstance(alignment, int)
        or isinstance(alignment, bool)
        or alignment <= 0
        or alignment & (alignment - 1)
    ):
        raise NotGGUFError(f"invalid general.alignment {alignment!r}")
    data_offset = -(-cursor.position // alignment) * alignment
    if data_offset > cursor.limit:
        raise HeaderTooLargeError(f"the tensor data starts past the first {cursor.limit} bytes")
    header = {"GGUF.version": version, "GGUF.tensor_count": tensor_count, "GGUF.kv_count": kv_count}
    return version, data_offset, {**fields, **header}


def read_gguf_fields(
    path: str,
    *,
    valid_bytes: int | None = None,
    file_size: int | None = None,
    limit: int = MAX_HEADER_BYTES,
) -> tuple[int, dict[str, object]]:
    """(data_offset, scalar key/values) of the GGUF file at `path` (blocking). The key/values
    include the header's own `GGUF.version`, `GGUF.tensor_count` and `GGUF.kv_count`, named as the
    gguf package names them; strings are cut to `MAX_GGUF_TEXT` characters with a marker, and at
    most `MAX_KEPT_FIELDS` key/values are kept.

    `path` may hold only the first bytes of the file: `valid_bytes` of them are real, and
    `file_size` is the size of the whole file (default: the size of `path`). Nothing past `limit`
    bytes is read: a header longer than that raises HeaderTooLargeError.
    Raises NotGGUFError (HeaderTooLargeError is one), IncompleteHeaderError, or OSError."""
    on_disk = os.path.getsize(path)
    size = on_disk if file_size is None else file_size
    real = min(on_disk, size) if valid_bytes is None else min(valid_bytes, on_disk, size)
    with open(path, "rb") as file:
        magic = file.read(len(GGUF_MAGIC))
        if real < len(GGUF_MAGIC) and real < size:
            raise IncompleteHeaderError(f"only {real} bytes available")
        if magic != GGUF_MAGIC:
            raise NotGGUFError(f"not a GGUF file (magic {magic!r})")
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            cursor = _Cursor(mapped, real, size, "<", limit)
            cursor.position = len(GGUF_MAGIC)
            _, data_offset, fields = _read_header(cursor)
    if data_offset > real and real < size:
        raise IncompleteHeaderError(f"header needs {data_offset} bytes, have {real}")
    return data_offset, fields


def read_gguf_metadata(
    path: str,
    *,
    valid_bytes: int | None = None,
    file_size: int | None = None,
    limit: int = MAX_HEADER_BYTES,
) -> GGUFMetadata:
    """Parse the header of the GGUF file at `path` (blocking: call it through llmkube.kube.blocking).

    `valid_bytes`: only this many leading bytes are real, of a file of `file_size` bytes (see
    `read_gguf_fields`); the result is trusted only when the whole header (everything before the
    tensor data) lies within them. Raises NotGGUFError, IncompleteHeaderError, or OSError.
    """
    _, fields = read_gguf_fields(path, valid_bytes=valid_bytes, file_size=file_size, limit=limit)
    return gguf_metadata_from_fields(fields)


def read_gguf_metadata_or_none(path: str) -> GGUFMetadata | None:
    """Metadata is informational: a file that is not GGUF (or unreadable) simply has none."""
    try:
        return read_gguf_metadata(path)
    except (HeaderError, OSError):
        return None
