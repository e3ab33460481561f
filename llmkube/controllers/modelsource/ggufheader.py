"""GGUF header → `status.gguf`, parsed by the maintained `gguf` package (GGUFReader), never by hand.

GGUFReader memory-maps the file and reads only the header pages (key/values and tensor infos);
tensor data is mapped, never read. It also accepts a *sparse* file whose first `valid_bytes` are real
and whose tail is a hole: that is how the first bytes of a remote file are parsed without fetching it.
"""

import inspect
import os
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt

from llmkube.api.model import GGUFMetadata
from llmkube.plan.model import gguf_metadata_from_fields
from llmkube.plan.model.gguf_metadata import TENSOR_BYTES_FIELD, TOKEN_COUNT_FIELD

_MAGIC = gguf.GGUF_MAGIC.to_bytes(4, "little")  # b"GGUF"


class _ArrayBackedReader(gguf.GGUFReader):
    """GGUFReader reading its bytes through a plain ndarray view of its memory map.

    The stock reader slices the `np.memmap` itself, and numpy runs the memmap subclass hooks
    (`__array_finalize__`, `__getitem__`) in Python for every slice: a 150k-token vocabulary needs
    millions of them, which made a Qwen-sized header take 7 s instead of 2 s. Only this byte
    accessor changes; every parsing decision stays the library's.
    """

    def _get(
        self,
        offset: int,
        dtype: npt.DTypeLike,
        count: int = 1,
        override_order: Any = None,
    ) -> npt.NDArray[Any]:
        plain = self.__dict__.get("_plain_bytes")
        if plain is None:
            plain = self.__dict__["_plain_bytes"] = self.data.view(np.ndarray)
        count = int(count)
        itemsize = int(np.empty([], dtype=dtype).itemsize)
        array = plain[offset : offset + itemsize * count].view(dtype=dtype)[:count]
        order = self.byte_order if override_order is None else override_order
        return array.view(array.dtype.newbyteorder(order))


# The accessor is a private method: use the fast reader only while its signature is the one it
# was written against, and fall back to the stock reader (slower, equally correct) otherwise.
_ACCESSOR_PARAMETERS = ["self", "offset", "dtype", "count", "override_order"]
FAST_READER_ACTIVE = list(inspect.signature(gguf.GGUFReader._get).parameters) == _ACCESSOR_PARAMETERS
_Reader: type[gguf.GGUFReader] = _ArrayBackedReader if FAST_READER_ACTIVE else gguf.GGUFReader


class HeaderError(Exception):
    """The file's header could not be turned into metadata."""


class NotGGUFError(HeaderError):
    pass


class IncompleteHeaderError(HeaderError):
    """The header runs past the bytes known to be real: fetch a longer prefix."""


def _scalar_fields(reader: gguf.GGUFReader) -> dict[str, object]:
    # Arrays (the tokenizer vocabulary, often 100k+ strings) are slow to convert: only their length
    # is read, from the field's index. The tensor infos give the bytes of the weights.
    fields: dict[str, object] = {
        name: field.contents()
        for name, field in reader.fields.items()
        if field.types and field.types[0] is not gguf.GGUFValueType.ARRAY
    }
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is not None:
        fields[TOKEN_COUNT_FIELD] = len(tokens.data)
    fields[TENSOR_BYTES_FIELD] = sum(int(tensor.n_bytes) for tensor in reader.tensors)
    return fields


def read_gguf_metadata(path: str, *, valid_bytes: int | None = None) -> GGUFMetadata:
    """Parse the header of the GGUF file at `path` (blocking: call it through llmkube.kube.blocking).

    `valid_bytes`: only this many leading bytes are real (the rest is a zero-filled hole). A short
    prefix can still *parse* (as garbage read from the zeros), so the result is trusted only when the
    whole header (everything before the tensor data, `data_offset`) lies within the real bytes.
    Raises NotGGUFError, IncompleteHeaderError, or OSError for I/O failures.
    """
    size = os.path.getsize(path)
    real = size if valid_bytes is None else min(valid_bytes, size)
    with open(path, "rb") as file:
        magic = file.read(len(_MAGIC))
    if real < len(_MAGIC) and real < size:
        raise IncompleteHeaderError(f"only {real} bytes available")
    if magic != _MAGIC:
        raise NotGGUFError(f"not a GGUF file (magic {magic!r})")
    try:
        reader = _Reader(path, "r")
    # GGUFReader parses untrusted bytes; its failure modes (ValueError, KeyError, IndexError, ...)
    # are not part of its API, and any of them means "no usable header here".
    except Exception as error:
        if real < size:
            raise IncompleteHeaderError(f"header does not fit in {real} bytes ({error})") from error
        raise NotGGUFError(f"invalid GGUF header: {error}") from error
    if reader.data_offset > real and real < size:
        raise IncompleteHeaderError(f"header needs {reader.data_offset} bytes, have {real}")
    return gguf_metadata_from_fields(_scalar_fields(reader))


def read_gguf_metadata_or_none(path: str) -> GGUFMetadata | None:
    """Metadata is informational: a file that is not GGUF (or unreadable) simply has none."""
    try:
        return read_gguf_metadata(path)
    except (HeaderError, OSError):
        return None
