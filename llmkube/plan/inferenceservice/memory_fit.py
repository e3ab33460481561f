"""Will it fit? The memory a llama.cpp service needs, estimated from its Model's GGUF metadata.

    weights   the tensor bytes the header lists (else the file size)
    KV cache  layers x context cells x (K width x K type size + V width x V type size); widths are
              KV heads x head size, so grouped-query attention needs a fraction of the heads' cache
    overhead  llama.cpp's compute and output buffers for one micro-batch, plus a fixed margin for
              the process itself

Checked against llama.cpp's own buffer sizes on synthetic models (bench/bench_memory_fit.py;
accuracy in docs/memory-fit.md). With GPUs, the offloaded layers' weights and cache go to GPU
memory, split across the GPUs like the runtime's --tensor-split; the rest stays in host memory.
Pure: no I/O, all sizes in bytes.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.meta import Condition, ConditionStatus
from llmkube.api.model import GGUFMetadata, GPUSpec, Model
from llmkube.apimachinery.quantity import QuantityError, parse_quantity
from llmkube.plan.conditions.standard import remove_condition, set_condition, update_condition_if_present
from llmkube.plan.inferenceservice.runtimes.llamacpp import gpu_layers, split_mode, tensor_split
from llmkube.plan.model.size import parse_size

MIB = 1024 * 1024
GIB = 1024 * MIB

# ggml's bytes per element of each KV cache type (block size / bytes per block for quantised ones).
CACHE_TYPE_BYTES: dict[str, float] = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
    "iq4_nl": 18 / 32,
}
DEFAULT_CACHE_TYPE = "f16"
DEFAULT_UBATCH = 512
AUTO_SLOTS = 4  # llama-server's slot count when --parallel is not given
CONTEXT_PADDING = 256  # llama.cpp rounds each sequence's context up to this
# The server process beyond its buffers (code, threads, tokenizer, HTTP): 12-20 MiB measured with
# small vocabularies; doubled, since an estimate is only useful when it does not under-count.
PROCESS_MARGIN = 32 * MIB


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    kv_cache: int
    overhead: int
    context: int  # KV cache cells (tokens), all slots together
    gpu_layers: int  # layers offloaded (0 on CPU)
    layers: int
    gpu_share: tuple[float, ...] = ()  # fraction of the offloaded part on each GPU
    assumptions: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.overhead

    @property
    def offloaded_fraction(self) -> float:
        return min(1.0, self.gpu_layers / self.layers) if self.layers else 0.0

    @property
    def gpu_total(self) -> int:
        """Bytes in GPU memory, all GPUs together (the offloaded layers' weights and cache, and
        the compute buffer, which follows the GPU when there is one)."""
        if not self.gpu_share:
            return 0
        fraction = self.offloaded_fraction
        return int((self.weights + self.kv_cache) * fraction) + self.compute_on_gpu

    @property
    def compute_on_gpu(self) -> int:
        return self.overhead - PROCESS_MARGIN if self.gpu_share else 0

    @property
    def host_total(self) -> int:
        return self.total - self.gpu_total

    def per_gpu(self) -> tuple[int, ...]:
        """Bytes on each GPU (the largest share decides whether it fits)."""
        return tuple(int(self.gpu_total * share) for share in self.gpu_share)


def _weights(model: Model, gguf: GGUFMetadata) -> tuple[int | None, str | None]:
    if gguf.tensor_bytes:
        return gguf.tensor_bytes, None
    status = model.status
    if status is not None and status.source_content_length:
        return status.source_content_length, "weights taken as the file size"
    size = parse_size(status.size if status else None)
    if size:
        return size, "weights taken as the file size"
    return None, None


def context_cells(spec: InferenceServiceSpec, gguf: GGUFMetadata) -> int:
    """KV cache cells: --ctx-size (default: the trained context), split over the slots, each slot's
    share rounded up to llama.cpp's padding, as llama.cpp sizes it."""
    requested = spec.context_size or gguf.context_length or 4096
    slots = spec.parallel_slots or 1
    per_slot = math.ceil(requested / slots / CONTEXT_PADDING) * CONTEXT_PADDING
    return per_slot * slots


def kv_cache_bytes(spec: InferenceServiceSpec, gguf: GGUFMetadata, cells: int) -> tuple[int, list[str]]:
    notes: list[str] = []
    layers = gguf.layer_count or 0
    heads = gguf.head_count or 1
    head_size = (gguf.embedding_size or 0) // heads
    kv_heads = gguf.head_count_kv
    if kv_heads is None:
        kv_heads = heads
        notes.append("KV heads unknown: assumed equal to attention heads (an upper bound)")
    key_width = kv_heads * (gguf.key_length or head_size)
    value_width = kv_heads * (gguf.value_length or head_size)
    type_k = spec.cache_type_custom_k or spec.cache_type_k or DEFAULT_CACHE_TYPE
    type_v = spec.cache_type_custom_v or spec.cache_type_v or DEFAULT_CACHE_TYPE
    size_k = CACHE_TYPE_BYTES.get(type_k, 2.0)
    size_v = CACHE_TYPE_BYTES.get(type_v, 2.0)
    return int(layers * cells * (key_width * size_k + value_width * size_v)), notes


def compute_bytes(spec: InferenceServiceSpec, gguf: GGUFMetadata, cells: int) -> int:
    """llama.cpp's compute buffer (the graph's scratch for one micro-batch) plus its output buffer.

    Fitted to llama.cpp's figures (flash attention on, llama.cpp's default where supported):
    per micro-batch token, the feed-forward and attention activations peak at 3 x FFN width +
    4 x embedding floats, i.e. at most 16 x embedding for the usual FFN widths (up to 4x); the
    attention mask is one f16 per cache cell of a sequence and token; the output buffer holds the
    logits of one token per slot. Without flash attention (forced off through extraArgs) the
    attention scores need more than this."""
    ubatch = min(spec.u_batch_size or DEFAULT_UBATCH, spec.batch_size or 2048)
    slots = spec.parallel_slots or AUTO_SLOTS
    # With parallelSlots unset, llama-server picks its slots itself and shares one cache among
    # them (kv_unified): the mask spans every cell. With parallelSlots set, each slot has its own.
    mask_cells = cells if spec.parallel_slots is None else cells // slots
    activations = ubatch * 4 * 16 * (gguf.embedding_size or 0)
    mask = ubatch * 2 * mask_cells
    output = (gguf.vocab_size or 32000) * 4 * slots
    return activations + mask + output


def gpu_shares(gpu: GPUSpec | None, gpu_count: int) -> tuple[float, ...]:
    """Each GPU's fraction of the offloaded part, as the runtime's --split-mode/--tensor-split
    place it (split mode none: everything on the first GPU)."""
    if gpu_count <= 0:
        return ()
    if split_mode(gpu) == "none":
        return (1.0,) + (0.0,) * (gpu_count - 1)
    layer_split = gpu.sharding.layer_split if gpu is not None and gpu.sharding is not None else None
    ratios = [int(part) for part in tensor_split(layer_split, gpu_count).split(",")]
    total = sum(ratios)
    return tuple(ratio / total for ratio in ratios)


def estimate_memory(model: Model, spec: InferenceServiceSpec, *, gpu_count: int) -> MemoryEstimate | None:
    """None when the Model carries no GGUF metadata to estimate from."""
    gguf = model.status.gguf if model.status is not None else None
    if gguf is None or not gguf.layer_count or not gguf.embedding_size:
        return None
    weights, weights_note = _weights(model, gguf)
    if weights is None:
        return None
    cells = context_cells(spec, gguf)
    kv, notes = kv_cache_bytes(spec, gguf, cells)
    if weights_note:
        notes.append(weights_note)
    layers = gguf.layer_count
    hardware = model.spec.hardware
    gpu = hardware.gpu if hardware is not None else None
    offloaded = min(gpu_layers(gpu), layers) if gpu_count > 0 else 0
    shares = gpu_shares(gpu, gpu_count)
    return MemoryEstimate(
        weights=weights,
        kv_cache=kv,
        overhead=compute_bytes(spec, gguf, cells) + PROCESS_MARGIN,
        context=cells,
        gpu_layers=offloaded,
        layers=layers,
        gpu_share=shares,
        assumptions=tuple(notes),
    )


# -- the verdict -----------------------------------------------------------------------------------

MEMORY_FIT = "MemoryFit"
#: `inference.llmkube.dev/memory-fit: enforce` on an InferenceService: do not start what the
#: estimate says cannot fit (Failed/InsufficientMemory). Without it a misfit is only reported.
ENFORCE_ANNOTATION = "inference.llmkube.dev/memory-fit"
ENFORCE_VALUE = "enforce"
INSUFFICIENT_MEMORY = "InsufficientMemory"


@dataclass(frozen=True)
class FitVerdict:
    status: ConditionStatus
    reason: str
    message: str
    estimate: MemoryEstimate | None = None

    @property
    def blocks(self) -> bool:
        return self.status == "False"


def size_text(num_bytes: float) -> str:
    """`5.1 GiB`, `640 MiB`: one decimal of GiB from 1 GiB up, whole MiB below."""
    if num_bytes >= GIB:
        return f"{num_bytes / GIB:.1f} GiB"
    return f"{max(1, round(num_bytes / MIB))} MiB"


def _parts(estimate: MemoryEstimate, scale: float = 1.0) -> str:
    unit = GIB if estimate.total * scale >= GIB else MIB
    name = "GiB" if unit == GIB else "MiB"

    def figure(value: float) -> str:
        return f"{value * scale / unit:.1f}" if unit == GIB else f"{round(value * scale / unit)}"

    weights, kv, overhead = figure(estimate.weights), figure(estimate.kv_cache), figure(estimate.overhead)
    return f"weights {weights} + KV {kv} + overhead {overhead} {name}"


def _quantity_bytes(text: str | None) -> int | None:
    if not text:
        return None
    try:
        value = parse_quantity(text).value
    except QuantityError:
        return None
    return int(value) if value > 0 else None


def gpu_memory_per_device(
    spec: InferenceServiceSpec, model: Model, node_gpu_memory: Sequence[int]
) -> tuple[int | None, str]:
    """Memory of one GPU and where the figure comes from: the service's resources.gpuMemory, the
    Model's hardware.gpu.memory, else the largest GPU among the nodes that offer GPUs (their
    `nvidia.com/gpu.memory` label)."""
    if spec.resources is not None and (found := _quantity_bytes(spec.resources.gpu_memory)):
        return found, "resources.gpuMemory"
    hardware = model.spec.hardware
    gpu = hardware.gpu if hardware is not None else None
    if gpu is not None and (found := _quantity_bytes(gpu.memory)):
        return found, "the Model's hardware.gpu.memory"
    if node_gpu_memory:
        return max(node_gpu_memory), "the largest GPU of the cluster's nodes"
    return None, ""


def judge_memory_fit(
    model: Model,
    spec: InferenceServiceSpec,
    *,
    runtime: str,
    gpu_count: int,
    node_gpu_memory: Sequence[int] = (),
) -> FitVerdict | None:
    """The MemoryFit verdict for a llama.cpp service, or None where no estimate applies (other
    runtimes size their memory themselves)."""
    if runtime != "llamacpp":
        return None
    estimate = estimate_memory(model, spec, gpu_count=gpu_count)
    if estimate is None:
        return FitVerdict(
            "Unknown",
            "NoModelMetadata",
            "the Model's status has no GGUF metadata (layers, heads, weights) to estimate from",
        )
    resources = spec.resources
    host_text = (resources.host_memory or resources.memory) if resources is not None else None
    host_limit = _quantity_bytes(host_text)
    notes = "".join(f"; {note}" for note in estimate.assumptions)
    if gpu_count <= 0:
        needs = f"needs ~{size_text(estimate.total)} ({_parts(estimate)})"
        if host_limit is None:
            return FitVerdict(
                "Unknown", "NoMemoryRequest", f"{needs}; no memory request to compare{notes}", estimate
            )
        if estimate.total > host_limit:
            return FitVerdict(
                "False",
                "ExceedsMemoryRequest",
                f"{needs}, memory request {size_text(host_limit)}{notes}",
                estimate,
            )
        return FitVerdict("True", "Fits", f"{needs}, memory request {size_text(host_limit)}{notes}", estimate)
    per_gpu = max(estimate.per_gpu())
    device, source = gpu_memory_per_device(spec, model, node_gpu_memory)
    on = f"{gpu_count} GPUs" if gpu_count > 1 else "1 GPU"
    needs = f"needs ~{size_text(per_gpu)} per GPU on {on} ({_parts(estimate)} in all)"
    host_needs = estimate.host_total
    if host_limit is not None and host_needs > host_limit:
        message = (
            f"needs ~{size_text(host_needs)} of host memory ({estimate.layers - estimate.gpu_layers} of "
            f"{estimate.layers} layers stay on the CPU), memory request {size_text(host_limit)}{notes}"
        )
        return FitVerdict("False", "ExceedsMemoryRequest", message, estimate)
    if device is None:
        return FitVerdict("Unknown", "UnknownGPUMemory", f"{needs}; GPU memory unknown{notes}", estimate)
    if per_gpu > device:
        return FitVerdict(
            "False", "ExceedsGPUMemory", f"{needs}, {size_text(device)} per GPU ({source}){notes}", estimate
        )
    return FitVerdict("True", "Fits", f"{needs}, {size_text(device)} per GPU ({source}){notes}", estimate)


def enforced(annotations: Mapping[str, str] | None) -> bool:
    return (annotations or {}).get(ENFORCE_ANNOTATION, "").strip().lower() == ENFORCE_VALUE


#: Node labels that give the memory of one GPU in MiB (NVIDIA GPU feature discovery's).
GPU_MEMORY_LABELS: dict[str, str] = {"nvidia.com/gpu": "nvidia.com/gpu.memory"}


def node_gpu_memory(nodes: Sequence[Mapping[str, Any]], gpu_resource: str) -> tuple[int, ...]:
    """Bytes of one GPU on each node that offers `gpu_resource` and says how much memory it has."""
    label = GPU_MEMORY_LABELS.get(gpu_resource)
    if label is None:
        return ()
    found = []
    for node in nodes:
        capacity = (node.get("status") or {}).get("capacity") or {}
        text = ((node.get("metadata") or {}).get("labels") or {}).get(label)
        if str(capacity.get(gpu_resource, "0")) in ("", "0") or not text:
            continue
        try:
            found.append(int(text) * MIB)
        except ValueError:
            continue
    return tuple(found)


def memory_fit_conditions(
    conditions: Sequence[Condition], verdict: FitVerdict | None, *, generation: int | None, now: datetime
) -> list[Condition]:
    """MemoryFit from the verdict; removed when no estimate applies to the service (its runtime
    sizes memory itself, or a metal host runs it): the condition's subject is gone. Without
    metadata to estimate from (a HuggingFace repo, a header that could not be read) an existing
    condition turns Unknown, and none is added: absence already says unknown."""
    if verdict is None:
        return remove_condition(conditions, MEMORY_FIT)
    if verdict.estimate is None:
        return update_condition_if_present(
            conditions,
            type_=MEMORY_FIT,
            status=verdict.status,
            reason=verdict.reason,
            message=verdict.message,
            now=now,
            observed_generation=generation,
        )
    return set_condition(
        conditions,
        type_=MEMORY_FIT,
        status=verdict.status,
        reason=verdict.reason,
        message=verdict.message,
        now=now,
        observed_generation=generation,
    )
