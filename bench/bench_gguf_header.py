"""Time to read a GGUF header with a Qwen-sized tokenizer (150k tokens, 150k merges, their types):
llmkube's reader (llmkube.sources.ggufheader) against the gguf package's
GGUFReader, which it replaced: parse time (imports excluded) and the peak RSS of a fresh process
that imports the reader and parses the file.

Usage: .venv/bin/python bench/bench_gguf_header.py [--tokens 151936] [--repeat 3]
Prints one JSON object. Needs the `testing` extra (the gguf package writes the file).
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import gguf
import numpy as np

CHILD = """
import resource, sys, time
if sys.argv[1] == "llmkube":
    from llmkube.sources import read_gguf_metadata
    started = time.perf_counter()
    read_gguf_metadata(sys.argv[2])
else:
    import gguf
    started = time.perf_counter()
    reader = gguf.GGUFReader(sys.argv[2])
    {n: f.contents() for n, f in reader.fields.items() if f.types[0] is not gguf.GGUFValueType.ARRAY}
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_file(path: Path, tokens: int) -> None:
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("bench")
    writer.add_context_length(32768)
    writer.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(tokens)])
    writer.add_array("tokenizer.ggml.merges", [f"m{i} n{i}" for i in range(tokens)])
    writer.add_key_value(
        "tokenizer.ggml.token_type", [1] * tokens, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32
    )
    writer.add_tensor("token_embd.weight", np.zeros((64, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def run(reader: str, path: Path) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, reader, str(path)], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), int(out[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=151_936)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "qwen-sized.gguf"
        write_file(path, args.tokens)
        result: dict[str, object] = {"tokens": args.tokens, "header_mb": round(path.stat().st_size / 1e6, 1)}
        for reader in ("llmkube", "gguf"):
            samples = [run(reader, path) for _ in range(args.repeat)]
            result[f"{reader}_parse_s"] = round(min(seconds for seconds, _ in samples), 3)
            result[f"{reader}_peak_rss_mib"] = round(min(rss for _, rss in samples), 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
