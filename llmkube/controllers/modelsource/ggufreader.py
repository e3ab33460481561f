"""The `gguf` package's GGUFReader, with a faster byte accessor (imported on the first header read:
gguf and numpy are large, and most controllers never read a header)."""

import inspect
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt

__all__ = ["FAST_READER_ACTIVE", "open_reader", "scalar_fields"]


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


def scalar_fields(reader: gguf.GGUFReader) -> dict[str, object]:
    # Arrays (the tokenizer vocabulary, often 100k+ strings) are never needed and are slow to convert.
    return {
        name: field.contents()
        for name, field in reader.fields.items()
        if field.types and field.types[0] is not gguf.GGUFValueType.ARRAY
    }


def open_reader(path: str) -> gguf.GGUFReader:
    return _Reader(path, "r")
