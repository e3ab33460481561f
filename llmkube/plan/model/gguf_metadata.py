"""From GGUF header key/values to `status.gguf`: quantization names and licenses."""

import re
from collections.abc import Mapping

from llmkube.api.model import GGUFMetadata
from llmkube.plan.model.bounds import INT64_MAX, MAX_GGUF_TEXT, in_range, truncated

# llama.cpp's `llama_ftype` (gguf-py LlamaFileType), without the MOSTLY_ prefix. The reference's own
# table drifts from llama.cpp after 18 (it calls 21 IQ3_XXS and 29 BF16); this one is cross-checked
# against the gguf package in the tests.
FILE_TYPE_NAMES: Mapping[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
}
UNKNOWN_QUANTIZATION = "Unknown"
# Figures the header reader derives (they are not key/values of the file): the number of
# tokenizer tokens (an array the reader does not convert) and the total bytes of tensor data.
TOKEN_COUNT_FIELD = "llmkube.tokenizer.token_count"
TENSOR_BYTES_FIELD = "llmkube.tensor_bytes"


def quantization_name(file_type: int) -> str:
    """`general.file_type` → `Q4_K_M`; numbers llama.cpp never defined read `Unknown`, as in the reference."""
    return FILE_TYPE_NAMES.get(file_type, UNKNOWN_QUANTIZATION)


# Known license ids and the free-form spellings that map to them, first match wins (reference
# pkg/license). `mit` must be a whole word: the reference's substring test turned "unlimited" and
# "permitted" into MIT.
_KNOWN_LICENSES = frozenset(
    {"apache-2.0", "mit", "llama-3.1-community", "llama-3.2-community", "llama-3.3-community", "gemma"}
)
_LICENSE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"apache"), "apache-2.0"),
    (re.compile(r"\bmit\b"), "mit"),
    (re.compile(r"llama[ _-]?3\.3"), "llama-3.3-community"),
    (re.compile(r"llama[ _-]?3\.2"), "llama-3.2-community"),
    (re.compile(r"llama[ _-]?3\.1"), "llama-3.1-community"),
    (re.compile(r"gemma"), "gemma"),
)


def normalize_license(raw: str) -> str:
    """Map a free-form `general.license` to a known id; unknown strings come back unchanged."""
    lower = raw.strip().lower()
    if lower in _KNOWN_LICENSES:
        return lower
    for pattern, license_id in _LICENSE_PATTERNS:
        if pattern.search(lower):
            return license_id
    return raw


#: llama.cpp holds the model's dimensions (context, embedding, layers, heads, head sizes,
#: vocabulary) in 32-bit fields: a larger value is not a dimension any runtime can load, whatever
#: the header says (a hostile one said 2^64-1, which the API server refuses as an int64).
_DIMENSION_MAX = 2**32 - 1


def _text(value: object) -> str | None:
    return truncated(value, MAX_GGUF_TEXT) if isinstance(value, str) and value else None


def _count(value: object, high: int = INT64_MAX) -> int | None:
    # bool is an int in Python; a boolean is never a count.
    return in_range(value, high=high)


def _dimension(value: object) -> int | None:
    return _count(value, _DIMENSION_MAX)


def gguf_metadata_from_fields(fields: Mapping[str, object]) -> GGUFMetadata:
    """Build `status.gguf` from header values (`GGUF.version`, `GGUF.tensor_count`, `general.*`,
    `<arch>.*`). Absent or mistyped keys, and numbers outside what their field can mean, are left
    unset rather than guessed; strings are cut to `MAX_GGUF_TEXT` characters with a marker.
    """
    architecture = _text(fields.get("general.architecture"))
    file_type = _count(fields.get("general.file_type"))
    license_text = _text(fields.get("general.license"))

    def arch_count(suffix: str) -> int | None:
        return _dimension(fields.get(f"{architecture}.{suffix}")) if architecture else None

    return GGUFMetadata(
        architecture=architecture,
        model_name=_text(fields.get("general.name")),
        quantization=quantization_name(file_type) if file_type is not None else None,
        context_length=arch_count("context_length"),
        embedding_size=arch_count("embedding_length"),
        layer_count=arch_count("block_count"),
        head_count=arch_count("attention.head_count"),
        head_count_kv=arch_count("attention.head_count_kv"),
        key_length=arch_count("attention.key_length"),
        value_length=arch_count("attention.value_length"),
        vocab_size=arch_count("vocab_size") or _dimension(fields.get(TOKEN_COUNT_FIELD)),
        tensor_bytes=_count(fields.get(TENSOR_BYTES_FIELD)),
        tensor_count=_count(fields.get("GGUF.tensor_count")),
        file_version=_dimension(fields.get("GGUF.version")),
        license=truncated(normalize_license(license_text), MAX_GGUF_TEXT) if license_text else None,
    )
