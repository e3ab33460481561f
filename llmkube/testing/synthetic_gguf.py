"""Write llama-architecture GGUF files of any shape that llama.cpp loads, with the `gguf` package.

For the memory-fit tests and bench/bench_memory_fit.py, which checks the estimate against
llama.cpp's own buffer sizes: the weights are zeros (the figures depend on shapes and types, not
values), the tokenizer is byte-level BPE padded with filler tokens to the wanted vocabulary size,
and the tensor type is F32, F16 or Q8_0.

    python -m llmkube.testing.synthetic_gguf OUT.gguf --embedding 2048 --layers 22 --heads 32 \
        --kv-heads 4 --feed-forward 5632 --vocab 32000 --type q8_0
"""

import argparse
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt

FILE_TYPES = {
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}


@dataclass(frozen=True)
class Shape:
    embedding: int
    layers: int
    heads: int
    kv_heads: int
    feed_forward: int
    vocab: int
    context: int = 4096
    type: str = "f16"


def _byte_symbols() -> list[str]:
    """GPT-2's printable stand-ins for the 256 byte values (every byte must be a token)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    symbols, extra = [], 0
    for byte in range(256):
        if byte in printable:
            symbols.append(chr(byte))
        else:
            symbols.append(chr(256 + extra))
            extra += 1
    return symbols


def _vocabulary(size: int) -> tuple[list[str], list[int], list[str]]:
    tokens = _byte_symbols()
    merges = ["Ġ t", "h e", "i n"]
    tokens += [m.replace(" ", "") for m in merges]
    controls = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    filler = size - len(tokens) - len(controls)
    tokens += [f"<filler_{i}>" for i in range(max(0, filler))]
    types = [int(gguf.TokenType.NORMAL)] * (len(tokens) - max(0, filler))
    types += [int(gguf.TokenType.USER_DEFINED)] * max(0, filler)
    tokens += controls
    types += [int(gguf.TokenType.CONTROL)] * len(controls)
    return tokens, types, merges


def write(path: Path, shape: Shape) -> int:
    """Write the file; returns its size in bytes."""
    tensor_type, file_type = FILE_TYPES[shape.type]
    head_size = shape.embedding // shape.heads
    tokens, types, merges = _vocabulary(shape.vocab)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"synthetic-{shape.layers}x{shape.embedding}-{shape.type}")
    writer.add_file_type(int(file_type))
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.embedding)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.feed_forward)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(head_size)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(len(tokens) - 3)
    writer.add_eos_token_id(len(tokens) - 1)

    def matrix(name: str, rows: int, cols: int) -> None:
        data: npt.NDArray[np.float32] = np.zeros((rows, cols), dtype=np.float32)
        if tensor_type == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, data)
        elif tensor_type == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(name, data.astype(np.float16))
        else:
            quantized = gguf.quants.quantize(data, tensor_type)
            writer.add_tensor(name, quantized, raw_shape=quantized.shape, raw_dtype=tensor_type)

    def vector(name: str, size: int) -> None:
        writer.add_tensor(name, np.ones(size, dtype=np.float32))

    kv_width = shape.kv_heads * head_size
    matrix("token_embd.weight", shape.vocab, shape.embedding)
    for block in range(shape.layers):
        vector(f"blk.{block}.attn_norm.weight", shape.embedding)
        matrix(f"blk.{block}.attn_q.weight", shape.embedding, shape.embedding)
        matrix(f"blk.{block}.attn_k.weight", kv_width, shape.embedding)
        matrix(f"blk.{block}.attn_v.weight", kv_width, shape.embedding)
        matrix(f"blk.{block}.attn_output.weight", shape.embedding, shape.embedding)
        vector(f"blk.{block}.ffn_norm.weight", shape.embedding)
        matrix(f"blk.{block}.ffn_gate.weight", shape.feed_forward, shape.embedding)
        matrix(f"blk.{block}.ffn_up.weight", shape.feed_forward, shape.embedding)
        matrix(f"blk.{block}.ffn_down.weight", shape.embedding, shape.feed_forward)
    vector("output_norm.weight", shape.embedding)
    matrix("output.weight", shape.vocab, shape.embedding)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.stat().st_size


def main() -> None:
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
    args = parser.parse_args()
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
    print(f"{args.out}: {write(args.out, shape)} bytes")


if __name__ == "__main__":
    main()
