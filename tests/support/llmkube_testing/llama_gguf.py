"""Write llama-architecture GGUF files of any shape that llama.cpp loads, with the `gguf` package.

One writer for every model the tests and benchmarks make: the tiny chat model a real llama-server
answers with (`tiny_gguf`), and the shapes the memory-fit tests and bench/bench_memory_fit.py
check the estimate on. Never downloaded; the same arguments give the same bytes.

What llama.cpp insists on, and therefore what this writes:
  * `llama.*` hyper-parameters: context_length, embedding_length, block_count,
    feed_forward_length, attention.head_count, attention.layer_norm_rms_epsilon (the rest have
    defaults, but they are written explicitly so the file says what it is).
  * A byte-level BPE tokenizer (`gpt2`): every one of the 256 byte symbols is a token (or text
    with an unseen byte cannot be tokenised), `tokenizer.ggml.merges` is present (a hard error
    otherwise), and each merge joins two existing tokens into a new one.
  * Tensors token_embd, output_norm, output and per block attn_norm, attn_q/k/v, attn_output,
    ffn_norm, ffn_gate/up/down, in F32, F16 or Q8_0 (1-D norms stay F32).

    python -m llmkube_testing.llama_gguf OUT.gguf --embedding 2048 --layers 22 --heads 32 \
        --kv-heads 4 --feed-forward 5632 --vocab 32000 --type q8_0 [--seed N] [--chat]
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

TensorType = Literal["f32", "f16", "q8_0"]

FILE_TYPES: dict[TensorType, tuple[gguf.GGMLQuantizationType, gguf.LlamaFileType]] = {
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}

# Control tokens of the ChatML conversation format, after the byte symbols, the merges and any
# filler.
END_OF_TEXT, TURN_START, TURN_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
CONTROL_TOKENS = (END_OF_TEXT, TURN_START, TURN_END)

# ChatML: rendered by llama.cpp's Jinja engine, and recognised by name when --no-jinja is given.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# The fewest merges a tokenizer may have (llama.cpp refuses none): for models whose text is never
# looked at.
FEW_MERGES = ("Ġ t", "h e", "i n")


@dataclass(frozen=True)
class Shape:
    embedding: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    feed_forward: int = 256
    #: the vocabulary padded with filler tokens to this size; None: its own tokens only
    vocab: int | None = None
    # Longer than any context the tests ask for: llama-server caps --ctx-size at the trained length.
    context: int = 4096
    type: TensorType = "f16"
    rms_epsilon: float = 1e-5
    rope_base: float = 10000.0

    @property
    def head_size(self) -> int:
        return self.embedding // self.heads


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


def vocabulary(merges: Sequence[str], size: int | None = None) -> Vocabulary:
    """Byte symbols (id = byte value), then one token per merge, then filler tokens up to `size`
    (user-defined, never produced by the merges), then the control tokens.

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
    types = [int(gguf.TokenType.NORMAL)] * len(tokens)
    filler = max(0, (size or 0) - len(tokens) - len(CONTROL_TOKENS))
    tokens += [f"<filler_{i}>" for i in range(filler)]
    types += [int(gguf.TokenType.USER_DEFINED)] * filler
    types += [int(gguf.TokenType.CONTROL)] * len(CONTROL_TOKENS)
    return Vocabulary(tuple(tokens) + CONTROL_TOKENS, tuple(types), tuple(kept))


def write_llama_gguf(
    path: Path | str,
    shape: Shape,
    *,
    name: str | None = None,
    merges: Sequence[str] = FEW_MERGES,
    seed: int | None = None,
    chat: bool = False,
    split_max_tensors: int = 0,
) -> Path:
    """Write the model to `path` (replacing it) and return the path.

    `seed`: random weights from that seed (a server then generates tokens); None: zeros, for models
    whose figures depend on shapes and types, not values. `chat`: also the keys a chat server needs
    (the vocabulary size, no BOS token before a ChatML prompt, the end of a turn ending generation,
    the template); without them the vocabulary's size is only the tokenizer's array length. The
    name (`general.name`) says the shape unless given. `split_max_tensors`: a sharded GGUF as
    llama.cpp's `llama-gguf-split` writes it (gguf's writer: `<stem>-00001-of-0000N.gguf` beside
    `path`, each shard with its `split.*` keys, the metadata in the first); the first shard's path
    is returned (what llama.cpp is given: it finds the others by name)."""
    path = Path(path)
    tensor_type, file_type = FILE_TYPES[shape.type]
    vocab = vocabulary(merges, shape.vocab)
    rng = np.random.default_rng(seed) if seed is not None else None

    # (also writes general.architecture)
    writer = gguf.GGUFWriter(str(path), "llama", split_max_tensors=split_max_tensors)
    writer.add_name(name or f"synthetic-{shape.layers}x{shape.embedding}-{shape.type}")
    writer.add_file_type(int(file_type))
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.embedding)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.feed_forward)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(shape.head_size)
    writer.add_rope_freq_base(shape.rope_base)
    writer.add_layer_norm_rms_eps(shape.rms_epsilon)
    if chat:
        writer.add_vocab_size(len(vocab.tokens))

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(list(vocab.tokens))
    writer.add_token_types(list(vocab.token_types))
    writer.add_token_merges(list(vocab.merges))
    writer.add_bos_token_id(vocab.id_of(END_OF_TEXT))
    if chat:
        writer.add_add_bos_token(False)  # a ChatML prompt starts with <|im_start|>, not a BOS token
    writer.add_eos_token_id(vocab.id_of(TURN_END))  # the end of an assistant turn ends generation
    if chat:
        writer.add_eot_token_id(vocab.id_of(TURN_END))
        writer.add_pad_token_id(vocab.id_of(END_OF_TEXT))
        writer.add_chat_template(CHAT_TEMPLATE)

    def matrix(tensor_name: str, rows: int, columns: int) -> None:
        # numpy's (rows, columns) is GGUF's {columns, rows}: the {in, out} llama.cpp expects.
        data: npt.NDArray[np.float32] = (
            np.zeros((rows, columns), dtype=np.float32)
            if rng is None
            else rng.standard_normal((rows, columns), dtype=np.float32) * 0.02
        )
        if tensor_type == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(tensor_name, data)
        elif tensor_type == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(tensor_name, data.astype(np.float16))
        else:
            quantized = gguf.quants.quantize(data, tensor_type)
            writer.add_tensor(tensor_name, quantized, raw_shape=quantized.shape, raw_dtype=tensor_type)

    def norm(tensor_name: str) -> None:
        writer.add_tensor(tensor_name, np.ones(shape.embedding, dtype=np.float32))

    def named(tensor: gguf.MODEL_TENSOR, block: int | None = None) -> str:
        return str(gguf.TENSOR_NAMES[tensor].format(bid=block)) + ".weight"

    tensor = gguf.MODEL_TENSOR
    q_width, kv_width = shape.heads * shape.head_size, shape.kv_heads * shape.head_size
    matrix(named(tensor.TOKEN_EMBD), len(vocab.tokens), shape.embedding)
    for block in range(shape.layers):
        norm(named(tensor.ATTN_NORM, block))
        matrix(named(tensor.ATTN_Q, block), q_width, shape.embedding)
        matrix(named(tensor.ATTN_K, block), kv_width, shape.embedding)
        matrix(named(tensor.ATTN_V, block), kv_width, shape.embedding)
        matrix(named(tensor.ATTN_OUT, block), shape.embedding, q_width)
        norm(named(tensor.FFN_NORM, block))
        matrix(named(tensor.FFN_GATE, block), shape.feed_forward, shape.embedding)
        matrix(named(tensor.FFN_UP, block), shape.feed_forward, shape.embedding)
        matrix(named(tensor.FFN_DOWN, block), shape.embedding, shape.feed_forward)
    norm(named(tensor.OUTPUT_NORM))
    matrix(named(tensor.OUTPUT), len(vocab.tokens), shape.embedding)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    shards = writer.format_shard_names(path)
    writer.close()
    return shards[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path, help="the GGUF file to write")
    parser.add_argument("--embedding", type=int, default=128, help="embedding length")
    parser.add_argument("--layers", type=int, default=2, help="transformer blocks")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument("--kv-heads", type=int, default=2, help="key/value heads (GQA)")
    parser.add_argument("--feed-forward", type=int, default=256, help="feed-forward width")
    parser.add_argument("--vocab", type=int, default=512, help="vocabulary size")
    parser.add_argument("--context", type=int, default=4096, help="trained context length")
    parser.add_argument("--type", choices=sorted(FILE_TYPES), default="f16", help="tensor type")
    parser.add_argument("--seed", type=int, default=None, help="random weights (default: zeros)")
    parser.add_argument("--chat", action="store_true", help="write the keys a chat server needs")
    args = parser.parse_args(argv)
    shape = Shape(
        args.embedding,
        args.layers,
        args.heads,
        args.kv_heads,
        args.feed_forward,
        args.vocab,
        args.context,
        args.type,
    )
    path = write_llama_gguf(args.out, shape, seed=args.seed, chat=args.chat)
    print(f"{path}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
