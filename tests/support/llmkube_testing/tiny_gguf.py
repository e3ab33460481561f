"""A tiny llama-architecture GGUF that a real llama.cpp server loads and answers chat requests with.

The weights are random (seeded), so the answers are gibberish, but the file is structurally
complete (`llama_gguf` says what llama.cpp's loader insists on) and carries a ChatML template.
It is never downloaded, and the same seed gives the same bytes. About 0.8 MB in F16 (1.5 MB in
F32); llama-server loads it in well under a second.

    python -m llmkube_testing.tiny_gguf OUT.gguf [--seed N] [--dtype f16|f32]
"""

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from llmkube_testing.llama_gguf import (
    CHAT_TEMPLATE,
    CONTROL_TOKENS,
    TURN_END,
    Shape,
    Vocabulary,
    byte_symbols,
    write_llama_gguf,
)
from llmkube_testing.llama_gguf import vocabulary as _vocabulary

__all__ = [
    "CHAT_TEMPLATE",
    "CONTROL_TOKENS",
    "DEFAULT_SHAPE",
    "MERGES",
    "TURN_END",
    "byte_symbols",
    "vocabulary",
    "write_tiny_gguf",
    "write_tiny_gguf_shards",
]

Dtype = Literal["f16", "f32"]

# Head size 128/4 = 32: llama.cpp only allows a quantised KV cache (q8_0, q4_0: blocks of 32) when
# the block size divides the head size, so `cacheTypeK: q8_0` works with this model too.
DEFAULT_SHAPE = Shape(embedding=128, layers=2, heads=4, kv_heads=2, feed_forward=256)

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


def vocabulary(merges: Sequence[str] = MERGES) -> Vocabulary:
    """The tiny model's tokens: the byte symbols, one per merge, the control tokens."""
    return _vocabulary(merges)


def write_tiny_gguf(
    path: Path | str, *, seed: int = 0, dtype: Dtype = "f16", shape: Shape = DEFAULT_SHAPE
) -> Path:
    """Write the model to `path` (replacing it) and return the path."""
    return write_llama_gguf(
        path,
        dataclasses.replace(shape, type=dtype),
        name=f"llmkube-tiny-llama-seed{seed}",
        merges=MERGES,
        seed=seed,
        chat=True,
    )


def write_tiny_gguf_shards(
    path: Path | str, *, shards: int = 2, seed: int = 0, dtype: Dtype = "f16"
) -> list[Path]:
    """The same model split in `shards` GGUF files beside `path` (`<stem>-00001-of-0000N.gguf`, ...),
    the way llama.cpp's `llama-gguf-split --split-max-tensors` splits it; llama.cpp loads it from the
    first. Returns the shards in order."""
    path = Path(path)
    tensors = 3 + 9 * DEFAULT_SHAPE.layers  # embeddings, output norm and output, 9 per block
    first = write_llama_gguf(
        path,
        dataclasses.replace(DEFAULT_SHAPE, type=dtype),
        name=f"llmkube-tiny-llama-seed{seed}",
        merges=MERGES,
        seed=seed,
        chat=True,
        split_max_tensors=-(-tensors // shards),
    )
    found = sorted(first.parent.glob(f"{path.stem}-*-of-{shards:05d}.gguf"))
    assert len(found) == shards, f"gguf wrote {[p.name for p in found]}, not {shards} shards"
    return found


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
