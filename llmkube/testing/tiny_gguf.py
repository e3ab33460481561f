"""A tiny llama-architecture GGUF that a real llama.cpp server loads and answers chat requests with.

The weights are random (seeded), so the answers are gibberish, but the file is structurally
complete: llama.cpp's loader checks the hyper-parameters, every tensor's name and shape, and a
usable tokenizer. It is written with the `gguf` package, never downloaded, and the same seed gives
the same bytes. About 0.8 MB in F16 (1.5 MB in F32); llama-server loads it in well under a second.

    python -m llmkube.testing.tiny_gguf OUT.gguf [--seed N] [--dtype f16|f32]

What llama.cpp insists on, and therefore what this writes:
  * `llama.*` hyper-parameters: context_length, embedding_length, block_count,
    feed_forward_length, attention.head_count, attention.layer_norm_rms_epsilon (the rest have
    defaults, but they are written explicitly so the file says what it is).
  * A byte-level BPE tokenizer (`gpt2`): every one of the 256 byte symbols is a token (or text
    with an unseen byte cannot be tokenised), `tokenizer.ggml.merges` is present (a hard error
    otherwise), and each merge joins two existing tokens into a new one.
  * Tensors token_embd, output_norm, output and per block attn_norm, attn_q/k/v, attn_output,
    ffn_norm, ffn_gate/up/down.
"""

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import gguf
import numpy as np
import numpy.typing as npt

Dtype = Literal["f16", "f32"]


@dataclass(frozen=True)
class TinyShape:
    """Head size 128/4 = 32: llama.cpp only allows a quantised KV cache (q8_0, q4_0: blocks of 32)
    when the block size divides the head size, so `cacheTypeK: q8_0` works with this model too."""

    embedding: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    feed_forward: int = 256
    # Longer than any context the tests ask for: llama-server caps --ctx-size at the trained length.
    context: int = 4096
    rms_epsilon: float = 1e-5
    rope_base: float = 10000.0

    @property
    def head_size(self) -> int:
        return self.embedding // self.heads


DEFAULT_SHAPE = TinyShape()

# Control tokens of the ChatML conversation format, after the byte symbols and the merges.
END_OF_TEXT, TURN_START, TURN_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
CONTROL_TOKENS = (END_OF_TEXT, TURN_START, TURN_END)

# ChatML: rendered by llama.cpp's Jinja engine, and recognised by name when --no-jinja is given.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Byte-level BPE merges in GPT-2's notation ("Ġ" is a space, "Ċ" a newline): common English pairs
# and a few words, each built only from tokens that exist before it (checked by `vocabulary`).
MERGES: tuple[str, ...] = (
    "Ġ t", "Ġ a", "h e", "i n", "r e", "o n", "e r", "Ġ s", "a t", "e n",
    "o r", "Ġ w", "Ġ o", "e s", "Ġ c", "i s", "i t", "Ġ b", "a n", "Ġ m",
    "Ġ f", "Ġ p", "o u", "Ġ h", "l l", "e d", "Ġ d", "Ġ l", "Ġ i", "Ġ y",
    "Ġ n", "Ġ k", "l e", "s t", "a r", "Ġ g", "Ġ u", "Ġ e", "l o", "u b",
    "Ġt he", "in g", "Ġo f", "Ġa n", "Ġan d", "Ġt o", "Ġ is", "Ġ in", "Ġ it", "Ġ on",
    "Ġ re", "Ġ he", "Ġy ou", "a s", "e l", "he ll", "hell o", "Ġ hello", "Ġw or", "l d",
    "Ġwor ld", "Ġk ub", "Ġkub e", "Ġm o", "Ġmo d", "Ġmod el", "Ċ Ċ", "Ġ Ġ", "ĠĠ Ġ", "Ġs er",
    "Ġser v", "Ġserv e",
)  # fmt: skip


def byte_symbols() -> list[str]:
    """GPT-2's reversible map from the 256 byte values to printable characters: printable Latin-1
    bytes stand for themselves, the others are shifted past U+0100 in order."""
    printable = {
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    }
    symbols, shifted = [], 0
    for byte in range(256):
        if byte in printable:
            symbols.append(chr(byte))
        else:
            symbols.append(chr(256 + shifted))
            shifted += 1
    return symbols


@dataclass(frozen=True)
class Vocabulary:
    tokens: tuple[str, ...]
    token_types: tuple[int, ...]
    merges: tuple[str, ...]

    def id_of(self, token: str) -> int:
        return self.tokens.index(token)


def vocabulary(merges: Sequence[str] = MERGES) -> Vocabulary:
    """Byte symbols (id = byte value), then one token per merge, then the control tokens.

    A merge whose halves are not tokens yet cannot be applied by the tokenizer, and one that
    repeats a token would give two ids to one string: both are rejected here."""
    tokens = byte_symbols()
    known = set(tokens)
    kept: list[str] = []
    for merge in merges:
        left, right = merge.split(" ")
        if left not in known or right not in known:
            raise ValueError(f"merge {merge!r}: {left!r} or {right!r} is not a token yet")
        if left + right in known:
            raise ValueError(f"merge {merge!r} would repeat the token {left + right!r}")
        kept.append(merge)
        tokens.append(left + right)
        known.add(left + right)
    types = [int(gguf.TokenType.NORMAL)] * len(tokens) + [int(gguf.TokenType.CONTROL)] * len(CONTROL_TOKENS)
    return Vocabulary(tuple(tokens) + CONTROL_TOKENS, tuple(types), tuple(kept))


def write_tiny_gguf(
    path: Path | str, *, seed: int = 0, dtype: Dtype = "f16", shape: TinyShape = DEFAULT_SHAPE
) -> Path:
    """Write the model to `path` (replacing it) and return the path."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    weight_type = np.float16 if dtype == "f16" else np.float32

    writer = gguf.GGUFWriter(str(path), "llama")  # also writes general.architecture
    writer.add_name(f"llmkube-tiny-llama-seed{seed}")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.embedding)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.feed_forward)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(shape.head_size)
    writer.add_rope_freq_base(shape.rope_base)
    writer.add_layer_norm_rms_eps(shape.rms_epsilon)
    writer.add_vocab_size(len(vocab.tokens))

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(list(vocab.tokens))
    writer.add_token_types(list(vocab.token_types))
    writer.add_token_merges(list(vocab.merges))
    writer.add_bos_token_id(vocab.id_of(END_OF_TEXT))
    writer.add_add_bos_token(False)  # a ChatML prompt starts with <|im_start|>, not a BOS token
    writer.add_eos_token_id(vocab.id_of(TURN_END))  # the end of an assistant turn ends generation
    writer.add_eot_token_id(vocab.id_of(TURN_END))
    writer.add_pad_token_id(vocab.id_of(END_OF_TEXT))
    writer.add_chat_template(CHAT_TEMPLATE)

    def matrix(rows: int, columns: int) -> npt.NDArray[np.generic]:
        # numpy's (rows, columns) is GGUF's {columns, rows}: the {in, out} llama.cpp expects.
        return (rng.standard_normal((rows, columns), dtype=np.float32) * 0.02).astype(weight_type)

    def name(tensor: gguf.MODEL_TENSOR, block: int | None = None) -> str:
        return str(gguf.TENSOR_NAMES[tensor].format(bid=block)) + ".weight"

    tensor = gguf.MODEL_TENSOR
    norm = np.ones(shape.embedding, dtype=np.float32)  # 1-D norms stay F32 whatever the dtype
    q_width, kv_width = shape.heads * shape.head_size, shape.kv_heads * shape.head_size
    writer.add_tensor(name(tensor.TOKEN_EMBD), matrix(len(vocab.tokens), shape.embedding))
    for block in range(shape.layers):
        writer.add_tensor(name(tensor.ATTN_NORM, block), norm)
        writer.add_tensor(name(tensor.ATTN_Q, block), matrix(q_width, shape.embedding))
        writer.add_tensor(name(tensor.ATTN_K, block), matrix(kv_width, shape.embedding))
        writer.add_tensor(name(tensor.ATTN_V, block), matrix(kv_width, shape.embedding))
        writer.add_tensor(name(tensor.ATTN_OUT, block), matrix(shape.embedding, q_width))
        writer.add_tensor(name(tensor.FFN_NORM, block), norm)
        writer.add_tensor(name(tensor.FFN_GATE, block), matrix(shape.feed_forward, shape.embedding))
        writer.add_tensor(name(tensor.FFN_UP, block), matrix(shape.feed_forward, shape.embedding))
        writer.add_tensor(name(tensor.FFN_DOWN, block), matrix(shape.embedding, shape.feed_forward))
    writer.add_tensor(name(tensor.OUTPUT_NORM), norm)
    writer.add_tensor(name(tensor.OUTPUT), matrix(len(vocab.tokens), shape.embedding))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a tiny random llama GGUF that llama.cpp serves.")
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=("f16", "f32"), default="f16")
    args = parser.parse_args(argv)
    path = write_tiny_gguf(args.out, seed=args.seed, dtype=args.dtype)
    print(f"{path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
