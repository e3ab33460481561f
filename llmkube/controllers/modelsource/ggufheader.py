"""GGUF header → `status.gguf`, parsed by the maintained `gguf` package (GGUFReader), never by hand.

GGUFReader memory-maps the file and reads only the header pages (key/values and tensor infos);
tensor data is mapped, never read. It also accepts a *sparse* file whose first `valid_bytes` are real
and whose tail is a hole: that is how the first bytes of a remote file are parsed without fetching it.

The reader (`ggufreader`: gguf and numpy, ~18 MiB of memory once imported) is imported by the first
header read, not with the controller: most controllers never read one.
"""

import os

from llmkube.api.model import GGUFMetadata
from llmkube.plan.model import gguf_metadata_from_fields

_MAGIC = b"GGUF"  # gguf.GGUF_MAGIC, little-endian


class HeaderError(Exception):
    """The file's header could not be turned into metadata."""


class NotGGUFError(HeaderError):
    pass


class IncompleteHeaderError(HeaderError):
    """The header runs past the bytes known to be real: fetch a longer prefix."""


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
    from llmkube.controllers.modelsource.ggufreader import open_reader, scalar_fields

    try:
        reader = open_reader(path)
    # GGUFReader parses untrusted bytes; its failure modes (ValueError, KeyError, IndexError, ...)
    # are not part of its API, and any of them means "no usable header here".
    except Exception as error:
        if real < size:
            raise IncompleteHeaderError(f"header does not fit in {real} bytes ({error})") from error
        raise NotGGUFError(f"invalid GGUF header: {error}") from error
    if reader.data_offset > real and real < size:
        raise IncompleteHeaderError(f"header needs {reader.data_offset} bytes, have {real}")
    return gguf_metadata_from_fields(scalar_fields(reader))


def read_gguf_metadata_or_none(path: str) -> GGUFMetadata | None:
    """Metadata is informational: a file that is not GGUF (or unreadable) simply has none."""
    try:
        return read_gguf_metadata(path)
    except (HeaderError, OSError):
        return None
