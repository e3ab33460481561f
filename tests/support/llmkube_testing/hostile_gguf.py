"""GGUF headers written byte by byte, as a hostile model source would serve them (tests, benches).

`gguf.GGUFWriter` only writes sensible files; these are the ones a tenant can serve instead: a
`general.name` of megabytes, counts of 2^64-1, arrays nested thousands deep, numbers no field can
hold. `HOSTILE` names each with the bytes of a whole file (header, then a little tensor data).
"""

import struct
from collections.abc import Iterable, Mapping

MAGIC = b"GGUF"
UINT8, UINT32, UINT64, STRING, ARRAY = 0, 4, 10, 8, 9
U64_MAX = 2**64 - 1
MIB = 1024 * 1024


def string(value: str | bytes) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return struct.pack("<Q", len(data)) + data


def kv_string(key: str, value: str | bytes) -> bytes:
    return string(key) + struct.pack("<I", STRING) + string(value)


def kv_uint32(key: str, value: int) -> bytes:
    return string(key) + struct.pack("<II", UINT32, value)


def kv_uint64(key: str, value: int) -> bytes:
    return string(key) + struct.pack("<IQ", UINT64, value)


def kv_array(key: str, item_type: int, count: int, payload: bytes = b"") -> bytes:
    return string(key) + struct.pack("<IIQ", ARRAY, item_type, count) + payload


def nested_arrays(key: str, depth: int) -> bytes:
    """`key` = [[[...[1]...]]], `depth` arrays deep (each holds one array, the last one byte)."""
    inner = struct.pack("<IQ", UINT8, 1) + b"\x01"
    for _ in range(depth - 2):
        inner = struct.pack("<IQ", ARRAY, 1) + inner
    return string(key) + struct.pack("<IIQ", ARRAY, ARRAY, 1) + inner


def tensor_info(name: str, shape: Iterable[int], ggml_type: int = 0, offset: int = 0) -> bytes:
    dims = list(shape)
    return (
        string(name)
        + struct.pack("<I", len(dims))
        + struct.pack(f"<{len(dims)}Q", *dims)
        + struct.pack("<IQ", ggml_type, offset)
    )


def gguf_file(
    key_values: Iterable[bytes],
    tensors: Iterable[bytes] = (),
    *,
    kv_count: int | None = None,
    tensor_count: int | None = None,
    data: bytes = bytes(4096),
    alignment: int = 32,
) -> bytes:
    """A whole file: header (counts as given, or the true ones), padding, then `data`."""
    kvs, infos = list(key_values), list(tensors)
    counts = struct.pack(
        "<IQQ",
        3,
        len(infos) if tensor_count is None else tensor_count,
        len(kvs) if kv_count is None else kv_count,
    )
    header = MAGIC + counts + b"".join(kvs) + b"".join(infos)
    return header + bytes(-len(header) % alignment) + data


def plain(name: str = "Tiny Llama", *, context_length: int = 4096) -> list[bytes]:
    """The key/values of an ordinary small llama header."""
    return [
        kv_string("general.architecture", "llama"),
        kv_string("general.name", name),
        kv_uint32("general.file_type", 15),
        kv_uint32("llama.context_length", context_length),
        kv_uint32("llama.block_count", 2),
    ]


def ordinary() -> bytes:
    return gguf_file(plain(), [tensor_info("token_embd.weight", [16, 8])], data=bytes(16 * 8 * 4))


#: What a hostile source was seen to serve (and a few more of the same kind).
HOSTILE: Mapping[str, bytes] = {
    "name-2mib": gguf_file(plain("N" * (2 * MIB))),
    "name-4mib": gguf_file(plain("N" * (4 * MIB))),
    "kv-count-max": gguf_file(plain(), kv_count=U64_MAX),
    "tensor-count-max": gguf_file(plain(), tensor_count=U64_MAX),
    "array-count-max": gguf_file([*plain(), kv_array("tokenizer.ggml.tokens", STRING, U64_MAX)]),
    "string-length-max": gguf_file(
        [
            kv_string("general.architecture", "llama"),
            string("general.name") + struct.pack("<IQ", STRING, U64_MAX),
        ]
    ),
    "context-length-max": gguf_file(
        [*plain()[:3], kv_uint64("llama.context_length", U64_MAX), kv_uint64("llama.block_count", U64_MAX)]
    ),
    "arrays-5000-deep": gguf_file([*plain(), nested_arrays("x.nested", 5000)]),
    "key-70000-bytes": gguf_file([*plain(), kv_uint32("k" * 70000, 1)]),
    "tensor-5-dims": gguf_file(plain(), [tensor_info("t", [1, 1, 1, 1, 1])]),
    "tensor-shape-overflow": gguf_file(plain(), [tensor_info("t", [2**40, 2**40])]),
    "alignment-3": gguf_file([*plain(), kv_uint32("general.alignment", 3)]),
}
