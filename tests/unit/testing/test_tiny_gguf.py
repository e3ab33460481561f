"""The tiny GGUF test model: deterministic, and shaped the way llama.cpp's loader requires."""

from pathlib import Path

import gguf
import pytest
from llmkube_testing.tiny_gguf import (
    CHAT_TEMPLATE,
    CONTROL_TOKENS,
    DEFAULT_SHAPE,
    MERGES,
    TURN_END,
    byte_symbols,
    vocabulary,
    write_tiny_gguf,
)

from llmkube.sources import read_gguf_metadata


def _field(reader: gguf.GGUFReader, key: str) -> object:
    field = reader.get_field(key)
    assert field is not None, key
    return field.contents()


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path: Path) -> None:
    first = write_tiny_gguf(tmp_path / "a.gguf", seed=7).read_bytes()
    again = write_tiny_gguf(tmp_path / "b.gguf", seed=7).read_bytes()
    other = write_tiny_gguf(tmp_path / "c.gguf", seed=8).read_bytes()
    assert first == again
    assert len(first) == len(other)
    assert first != other


@pytest.mark.parametrize(("dtype", "max_bytes"), [("f16", 1_000_000), ("f32", 2_000_000)])
def test_size_stays_tiny(tmp_path: Path, dtype: str, max_bytes: int) -> None:
    path = write_tiny_gguf(tmp_path / "m.gguf", dtype=dtype)  # type: ignore[arg-type]
    assert 100_000 < path.stat().st_size < max_bytes


def test_llama_hyper_parameters_and_tensors(tmp_path: Path) -> None:
    reader = gguf.GGUFReader(write_tiny_gguf(tmp_path / "m.gguf"))
    shape = DEFAULT_SHAPE
    assert _field(reader, "general.architecture") == "llama"
    assert _field(reader, "llama.context_length") == shape.context
    assert _field(reader, "llama.embedding_length") == shape.embedding
    assert _field(reader, "llama.block_count") == shape.layers
    assert _field(reader, "llama.feed_forward_length") == shape.feed_forward
    assert _field(reader, "llama.attention.head_count") == shape.heads
    assert _field(reader, "llama.attention.head_count_kv") == shape.kv_heads
    assert _field(reader, "llama.rope.dimension_count") == shape.embedding // shape.heads
    n_vocab = len(vocabulary().tokens)
    shapes = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}
    per_block = {
        "attn_norm",
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_norm",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    }
    expected_names = {"token_embd.weight", "output_norm.weight", "output.weight"} | {
        f"blk.{b}.{part}.weight" for b in range(shape.layers) for part in per_block
    }
    assert set(shapes) == expected_names
    # GGUF lists dimensions innermost first: {in, out}.
    assert shapes["token_embd.weight"] == (shape.embedding, n_vocab)
    assert shapes["blk.0.attn_k.weight"] == (shape.embedding, shape.kv_heads * shape.head_size)
    assert shapes["blk.1.ffn_down.weight"] == (shape.feed_forward, shape.embedding)
    assert shapes["output_norm.weight"] == (shape.embedding,)


def test_byte_level_tokenizer_with_chatml(tmp_path: Path) -> None:
    reader = gguf.GGUFReader(write_tiny_gguf(tmp_path / "m.gguf"))
    tokens = _field(reader, "tokenizer.ggml.tokens")
    assert _field(reader, "tokenizer.ggml.model") == "gpt2"
    assert isinstance(tokens, list)
    assert tokens[:256] == byte_symbols()  # every byte is a token: any text can be tokenised
    assert tokens[-len(CONTROL_TOKENS) :] == list(CONTROL_TOKENS)
    assert _field(reader, "tokenizer.ggml.merges") == list(MERGES)
    assert _field(reader, "tokenizer.ggml.eos_token_id") == tokens.index(TURN_END)
    assert _field(reader, "tokenizer.ggml.add_bos_token") is False
    assert _field(reader, "tokenizer.chat_template") == CHAT_TEMPLATE


def test_byte_symbols_are_a_bijection() -> None:
    symbols = byte_symbols()
    assert len(set(symbols)) == 256
    assert symbols[ord("a")] == "a"
    assert symbols[ord(" ")] == "Ġ"
    assert symbols[ord("\n")] == "Ċ"


@pytest.mark.parametrize(
    ("merges", "problem"),
    [
        (["h e", "he llo"], "not a token yet"),  # "llo" does not exist
        (["h e", "h e"], "repeat the token"),
        (["a b", "ab c", "a bc"], "not a token yet"),
    ],
)
def test_invalid_merges_are_rejected(merges: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        vocabulary(merges)


def test_every_merge_adds_one_token() -> None:
    vocab = vocabulary()
    assert len(vocab.tokens) == 256 + len(MERGES) + len(CONTROL_TOKENS)
    assert len(set(vocab.tokens)) == len(vocab.tokens)
    assert [vocab.tokens[256 + i] for i in range(len(MERGES))] == [m.replace(" ", "") for m in MERGES]


def test_the_controller_reads_it_like_any_gguf(tmp_path: Path) -> None:
    metadata = read_gguf_metadata(str(write_tiny_gguf(tmp_path / "m.gguf", seed=3)))
    assert metadata.architecture == "llama"
    assert metadata.model_name == "llmkube-tiny-llama-seed3"
    assert metadata.quantization == "F16"
    assert metadata.layer_count == DEFAULT_SHAPE.layers
    assert metadata.context_length == DEFAULT_SHAPE.context
