"""How close is llmkube's memory-fit estimate to what llama.cpp really allocates?

Writes synthetic llama GGUFs (llmkube_testing.llama_gguf), reads their headers the way the Model
controller does, starts a real `llama-server` with the arguments llmkube's llama.cpp runtime builds
for each service shape, reads the buffer sizes llama.cpp logs (model, KV cache, compute, output),
and prints them next to plan.memory_fit's estimate as JSON lines (MiB), with the relative error of
the total.

    python bench/bench_memory_fit.py --llama-server PATH [--work DIR] [--only NAME]

No llama-server here? The node tier builds one (see llmkube_testing); any CPU build of llama.cpp's
server works. Only loopback is used; each server is stopped as soon as it has loaded the model.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from llmkube_testing.llama_gguf import Shape, write_llama_gguf

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.memory_fit import MIB, PROCESS_MARGIN, estimate_memory
from llmkube.plan.model.size import format_size
from llmkube.sources import read_gguf_metadata

MODELS = {
    "tiny-f32": Shape(128, 2, 4, 2, 256, 512, type="f32"),
    "small-f16": Shape(1024, 8, 16, 4, 2816, 32000, type="f16"),
    "tinyllama-q8_0": Shape(2048, 22, 32, 4, 5632, 32000, type="q8_0"),
    "mha-f16": Shape(768, 12, 12, 12, 3072, 50257, type="f16"),
}
SERVICES: list[dict[str, object]] = [
    {},
    {"contextSize": 4096, "parallelSlots": 4},
    {"contextSize": 8192, "cacheTypeK": "q8_0", "cacheTypeV": "q8_0"},
    {"contextSize": 2048, "flashAttention": True},
    {"contextSize": 16384, "parallelSlots": 2, "cacheTypeK": "q4_0", "cacheTypeV": "f16"},
]
_BUFFER = re.compile(
    r"(?P<where>\S+)\s+(?P<what>model|KV|compute|output) buffer size =\s+(?P<mib>[0-9.]+) MiB"
)


@dataclass
class Measured:
    model: float = 0.0
    kv: float = 0.0
    compute: float = 0.0
    output: float = 0.0
    rss: float = 0.0  # the process's resident memory once loaded (what a memory limit counts)

    @property
    def total(self) -> float:
        return self.model + self.kv + self.compute + self.output


def server_args(spec: InferenceServiceSpec, model_path: Path, port: int) -> list[str]:
    """The llama.cpp flags llmkube's runtime sets for these fields
    (plan/inferenceservice/runtimes/llamacpp.py)."""
    args = ["--model", str(model_path), "--host", "127.0.0.1", "--port", str(port), "-lv", "4"]
    if spec.context_size:
        args += ["--ctx-size", str(spec.context_size)]
    if spec.parallel_slots:
        args += ["--parallel", str(spec.parallel_slots)]
    if spec.cache_type_k:
        args += ["--cache-type-k", spec.cache_type_k]
    if spec.cache_type_v:
        args += ["--cache-type-v", spec.cache_type_v]
    # --flash-attn is only passed with a GPU (the runtime's rule), so on CPU llama.cpp decides (auto).
    return args


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def measure(server: Path, args: list[str], log: Path, within: float = 300) -> Measured:
    with log.open("w") as out:
        process = subprocess.Popen([str(server), *args], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + within
    rss_kib = 0
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if "model loaded" in log.read_text(errors="replace"):
                time.sleep(1.0)  # let the warm-up run finish
                rss_kib = _rss_kib(process.pid)
                break
            time.sleep(0.2)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    found = Measured()
    for match in _BUFFER.finditer(log.read_text(errors="replace")):
        field = {"model": "model", "KV": "kv", "compute": "compute", "output": "output"}[match["what"]]
        setattr(found, field, getattr(found, field) + float(match["mib"]))
    found.rss = round(rss_kib / 1024, 2)
    if found.model == 0:
        raise RuntimeError(f"llama-server did not load the model; see {log}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--llama-server", type=Path, required=True, help="a llama-server binary (CPU build)")
    parser.add_argument("--work", type=Path, help="where to write the GGUF files (default: a temp dir)")
    parser.add_argument("--only", action="append", help="only these models (repeatable)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="llmkube-memfit-"))
    work.mkdir(parents=True, exist_ok=True)
    port = 18400
    for name, shape in MODELS.items():
        if args.only and name not in args.only:
            continue
        path = work / f"{name}.gguf"
        if not path.exists():
            print(f"writing {path} ...", file=sys.stderr, flush=True)
            write_llama_gguf(path, shape)
        size = path.stat().st_size
        model = Model.model_validate(
            {
                "metadata": {"name": name},
                "spec": {"source": f"/models/{name}.gguf"},
                "status": {
                    "phase": "Ready",
                    "size": format_size(size),
                    "gguf": read_gguf_metadata(str(path)).to_json(),
                },
            }
        )
        for fields in SERVICES:
            spec = InferenceServiceSpec.model_validate({"modelRef": name, **fields})
            port += 1
            measured = measure(args.llama_server, server_args(spec, path, port), work / f"{name}-{port}.log")
            estimate = estimate_memory(model, spec, gpu_count=0)
            assert estimate is not None
            row = {
                "model": name,
                "file_mib": round(size / MIB, 2),
                "service": fields,
                "llama_cpp_mib": {
                    "model": measured.model,
                    "kv": measured.kv,
                    "compute": measured.compute,
                    "output": measured.output,
                    "total": round(measured.total, 2),
                    "process_rss": measured.rss,
                },
                "estimate_mib": {
                    "weights": round(estimate.weights / MIB, 2),
                    "kv": round(estimate.kv_cache / MIB, 2),
                    "overhead": round(estimate.overhead / MIB, 2),
                    "total": round(estimate.total / MIB, 2),
                },
                # llama.cpp's buffers against the estimate without its process margin, and the
                # whole estimate against the process's resident memory once loaded.
                "buffers_error_pct": round(
                    100 * ((estimate.total - PROCESS_MARGIN) / MIB - measured.total) / measured.total, 1
                ),
                "total_vs_rss_pct": round(100 * (estimate.total / MIB - measured.rss) / measured.rss, 1),
            }
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
