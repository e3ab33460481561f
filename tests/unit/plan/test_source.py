import pytest

from llmkube.plan.model.source import (
    PVCSource,
    SourceKind,
    cache_key,
    canonical_basename,
    classify_source,
    local_path,
    parse_pvc_source,
)


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("pvc://models/llama/x.gguf", SourceKind.PVC),
        ("file:///data/x.gguf", SourceKind.LOCAL),
        ("/data/x.gguf", SourceKind.LOCAL),
        ("http://host/x.gguf", SourceKind.HTTP),
        ("https://host/x.gguf", SourceKind.HTTP),
        ("Qwen/Qwen2.5-0.5B-Instruct", SourceKind.HUGGINGFACE),
        ("org/sub/repo_v1.2", SourceKind.HUGGINGFACE),
        ("model.gguf", SourceKind.UNKNOWN),  # no slash: not a repo id
        ("-org/repo", SourceKind.UNKNOWN),  # must start alphanumeric
        ("org/re po", SourceKind.UNKNOWN),
        ("hf://org/repo", SourceKind.HF),
        ("hf://org/repo@v1", SourceKind.HF),
        ("s3://bucket/key", SourceKind.S3),
        ("gs://bucket/key", SourceKind.GS),
        ("ftp://bucket/key", SourceKind.UNKNOWN),
        ("", SourceKind.UNKNOWN),
    ],
)
def test_classify_source(source: str, kind: SourceKind) -> None:
    assert classify_source(source) is kind


def test_local_path() -> None:
    assert local_path("file:///data/x.gguf") == "/data/x.gguf"
    assert local_path("/data/x.gguf") == "/data/x.gguf"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("pvc://models/llama/x.gguf", PVCSource("models", "llama/x.gguf")),
        ("pvc://models/x.gguf", PVCSource("models", "x.gguf")),
        ("pvc://models/", None),
        ("pvc://models", None),
        ("pvc:///x.gguf", None),
    ],
)
def test_parse_pvc_source(source: str, expected: PVCSource | None) -> None:
    assert parse_pvc_source(source) == expected


def test_cache_key_is_stable_short_hex_and_distinguishes_sources() -> None:
    a, b = cache_key("https://h/a.gguf"), cache_key("https://h/b.gguf")
    assert len(a) == 16 and int(a, 16) >= 0
    assert a == cache_key("https://h/a.gguf") and a != b


@pytest.mark.parametrize(
    ("model_name", "gguf_name", "expected"),
    [
        ("tiny", None, "tiny.gguf"),
        ("tiny", "Llama 3.2 1B Instruct", "Llama-3.2-1B-Instruct.gguf"),
        ("tiny", "///", "tiny.gguf"),
        ("", None, "model.gguf"),
    ],
)
def test_canonical_basename(model_name: str, gguf_name: str | None, expected: str) -> None:
    assert canonical_basename(model_name, gguf_name) == expected
