import gguf
import pytest

from llmkube.api.model import GGUFMetadata
from llmkube.plan.model import gguf_metadata_from_fields, normalize_license, quantization_name
from llmkube.plan.model.gguf_metadata import FILE_TYPE_NAMES


def test_file_type_table_matches_llama_cpp() -> None:
    # Every name in our table is llama.cpp's, and every file type llama.cpp defines is in the table.
    upstream = {
        member.value: member.name.removeprefix("MOSTLY_").removeprefix("ALL_")
        for member in gguf.LlamaFileType
        if member is not gguf.LlamaFileType.GUESSED
    }
    assert dict(FILE_TYPE_NAMES) == upstream


@pytest.mark.parametrize(
    ("file_type", "name"),
    [
        (0, "F32"),
        (1, "F16"),
        (2, "Q4_0"),
        (7, "Q8_0"),
        (15, "Q4_K_M"),
        (18, "Q6_K"),
        (32, "BF16"),
        (4, "Unknown"),
        (999, "Unknown"),
    ],
)
def test_quantization_name(file_type: int, name: str) -> None:
    assert quantization_name(file_type) == name


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("apache-2.0", "apache-2.0"),
        ("Apache License 2.0", "apache-2.0"),
        ("MIT", "mit"),
        ("The MIT License", "mit"),
        ("mit-license", "mit"),
        ("unlimited use permitted", "unlimited use permitted"),  # "mit" inside words is not MIT
        ("Llama 3.1 Community License", "llama-3.1-community"),
        ("llama3.2", "llama-3.2-community"),
        ("LLAMA-3.3", "llama-3.3-community"),
        ("llama_3.1", "llama-3.1-community"),
        ("Gemma Terms of Use", "gemma"),
        (" gemma ", "gemma"),
        ("cc-by-nc-4.0", "cc-by-nc-4.0"),  # unknown: unchanged
        ("Other Custom License", "Other Custom License"),  # unknown keeps its case
    ],
)
def test_normalize_license(raw: str, normalized: str) -> None:
    assert normalize_license(raw) == normalized


def test_metadata_from_a_full_header() -> None:
    fields: dict[str, object] = {
        "GGUF.version": 3,
        "GGUF.tensor_count": 291,
        "general.architecture": "llama",
        "general.name": "Meta Llama 3.1 8B Instruct",
        "general.file_type": 15,
        "general.license": "llama3.1",
        "llama.context_length": 131072,
        "llama.embedding_length": 4096,
        "llama.block_count": 32,
        "llama.attention.head_count": 32,
        "qwen2.context_length": 999,  # another architecture's keys are ignored
    }
    assert gguf_metadata_from_fields(fields) == GGUFMetadata(
        architecture="llama",
        model_name="Meta Llama 3.1 8B Instruct",
        quantization="Q4_K_M",
        context_length=131072,
        embedding_size=4096,
        layer_count=32,
        head_count=32,
        tensor_count=291,
        file_version=3,
        license="llama-3.1-community",
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, GGUFMetadata()),
        # without an architecture the <arch>.* keys cannot be found
        ({"llama.context_length": 4096, "general.file_type": 1}, GGUFMetadata(quantization="F16")),
        # wrong types and empty strings are left unset rather than guessed
        (
            {
                "general.architecture": "",
                "general.name": 7,
                "general.file_type": "15",
                "general.license": "",
                "GGUF.version": True,
                "GGUF.tensor_count": -1,
            },
            GGUFMetadata(),
        ),
        (
            {"general.architecture": "phi3", "phi3.context_length": 4096.0, "phi3.block_count": 32},
            GGUFMetadata(architecture="phi3", layer_count=32),
        ),
    ],
)
def test_metadata_ignores_missing_and_mistyped_values(
    fields: dict[str, object], expected: GGUFMetadata
) -> None:
    assert gguf_metadata_from_fields(fields) == expected
