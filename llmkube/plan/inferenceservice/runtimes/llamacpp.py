"""llama.cpp `llama-server`: the reference operator's exact argument order.

Only `--parallel` and `--rope-scaling` are checked against extraArgs (the user's value wins), and
`--metrics` is appended last unless the user already passed it (the reference passed it twice:
https://github.com/defilantech/LLMKube/issues/1384). No `--model ""` when there is no model file.
"""

import re
from functools import reduce
from math import gcd

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import GPUSpec
from llmkube.plan.inferenceservice.images import DEFAULT_RUNTIME_IMAGES
from llmkube.plan.inferenceservice.runtimes.base import (
    ContainerProcess,
    RuntimeDefaults,
    RuntimeInputs,
    has_flag,
)
from llmkube.plan.inferenceservice.serving_mode import llamacpp_mode_args

DEFAULTS = RuntimeDefaults(
    name="llamacpp",
    container_name="llama-server",
    default_image=DEFAULT_RUNTIME_IMAGES["llamacpp"],
    default_port=8080,
    needs_model_init=True,
    hpa_metric="llamacpp:requests_processing",
    probe="http",
    writable_dirs=("/tmp",),  # llama-server writes nothing else (`-hf` downloads go to $HOME/.cache)
    in_flight_metrics=("llamacpp:requests_processing", "llamacpp:requests_deferred"),
)
DEFAULT_GPU_LAYERS = 99  # offload everything when the Model does not say otherwise
_LAYER_RANGE = re.compile(r"^\s*([0-9]+)\s*-\s*([0-9]+)\s*$")


def build(inputs: RuntimeInputs) -> ContainerProcess:
    spec, gpus = inputs.spec, inputs.gpu_count
    extra = spec.extra_args or []
    # No `--model ""` when there is no local file; users bring their own -m in extraArgs.
    args: list[str] = ["--model", inputs.model_path] if inputs.model_path else []
    if inputs.mmproj_path and not has_flag(extra, "--mmproj", "-mm"):
        args += ["--mmproj", inputs.mmproj_path]
    # v0.9 bindAddress reaches `inputs.host` (the planner's); a --host in extraArgs wins.
    if not has_flag(extra, "--host"):
        args += ["--host", inputs.host]
    args += ["--port", str(inputs.port)]
    if gpus > 0:
        args += ["--n-gpu-layers", str(gpu_layers(inputs.gpu))]
    if gpus > 1:
        args += split_args(inputs.gpu, gpus)
    # The schema bounds every number below (contextSize and originalContext >= 128, the batch
    # sizes and parallelSlots >= 1, moeCPULayers >= 0): a set, non-zero value is a valid one.
    if spec.context_size:
        args += ["--ctx-size", str(spec.context_size)]
    rope = spec.rope_scaling
    if rope and rope.type and not has_flag(extra, "--rope-scaling"):
        args += ["--rope-scaling", rope.type]
        if rope.factor:
            args += ["--rope-scale", rope.factor]
        if rope.original_context:
            args += ["--yarn-orig-ctx", str(rope.original_context)]
    if spec.parallel_slots and not has_flag(extra, "--parallel", "-np"):
        args += ["--parallel", str(spec.parallel_slots)]
    flash = spec.flash_attention if spec.flash_attention is not None else inputs.flash_attention_default
    if flash and gpus > 0:
        args += ["--flash-attn", "on"]
    elif spec.flash_attention is False and inputs.flash_attention_default and gpus > 0:
        args += ["--flash-attn", "off"]  # the default would turn it on: off, as the spec says
    if spec.jinja:
        args.append("--jinja")
    if cache_k := spec.cache_type_custom_k or spec.cache_type_k:
        args += ["--cache-type-k", cache_k]
    if cache_v := spec.cache_type_custom_v or spec.cache_type_v:
        args += ["--cache-type-v", cache_v]
    if spec.moe_cpu_offload:
        args.append("--cpu-moe")
    if spec.moe_cpu_layers:
        args += ["--n-cpu-moe", str(spec.moe_cpu_layers)]
    if spec.no_kv_offload:
        args.append("--no-kv-offload")
    for override in spec.tensor_overrides or []:
        args += ["--override-tensor", override]
    if spec.batch_size:
        args += ["--batch-size", str(spec.batch_size)]
    if spec.u_batch_size:
        args += ["--ubatch-size", str(spec.u_batch_size)]
    if spec.no_warmup:
        args.append("--no-warmup")
    args += speculative_args(inputs)
    if spec.reasoning_budget is not None:  # 0 is meaningful: it disables thinking
        args += ["--reasoning-budget", str(spec.reasoning_budget)]
        if spec.reasoning_budget_message:
            args += ["--reasoning-budget-message", spec.reasoning_budget_message]
    for override in spec.metadata_overrides or []:
        args += ["--override-kv", override]
    args += llamacpp_mode_args(spec)
    args += extra
    if "--metrics" not in extra:
        args.append("--metrics")
    return ContainerProcess(args=tuple(args))


#: the reference's older names for llama.cpp's --spec-type values
SPEC_TYPE_ALIASES = {"mtp": "draft-mtp", "draft": "draft-simple", "disabled": "none"}
#: the --spec-type values that load draft weights (-md)
DRAFT_WEIGHT_TYPES = frozenset({"draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark"})


def spec_type(spec: InferenceServiceSpec) -> str:
    """The --spec-type value the spec asks for; "none" when it asks for none."""
    decoding = spec.speculative_decoding
    if decoding is None:
        return "none"
    return SPEC_TYPE_ALIASES.get(decoding.type, decoding.type)


def speculative_args(inputs: RuntimeInputs) -> list[str]:
    """v0.9 speculativeDecoding: --spec-type, the draft weights (-md), --spec-draft-n-max and
    --spec-draft-p-min (the pinned llama-server removed --draft-max/--draft-min for these)."""
    decoding, kind = inputs.spec.speculative_decoding, spec_type(inputs.spec)
    if decoding is None or kind == "none":
        return []
    args = ["--spec-type", kind]
    if kind in DRAFT_WEIGHT_TYPES and inputs.draft_model_path:
        args += ["-md", inputs.draft_model_path]
    if decoding.n_draft_max:
        args += ["--spec-draft-n-max", str(decoding.n_draft_max)]
    if decoding.p_min is not None:
        args += ["--spec-draft-p-min", repr(decoding.p_min)]
    return args


def gpu_layers(gpu: GPUSpec | None) -> int:
    """`hardware.gpu.layers` when positive; unset, 0 and -1 all mean "offload everything"."""
    layers = gpu.layers if gpu and gpu.layers else 0
    return layers if layers > 0 else DEFAULT_GPU_LAYERS


def split_mode(gpu: GPUSpec | None) -> str:
    strategy = gpu.sharding.strategy if gpu and gpu.sharding else None
    if strategy in ("row", "tensor"):
        return "row"
    if strategy == "none":
        return "none"
    return "layer"


def split_args(gpu: GPUSpec | None, gpu_count: int) -> list[str]:
    mode = split_mode(gpu)
    if mode == "none":
        return ["--split-mode", "none"]
    layer_split = gpu.sharding.layer_split if gpu and gpu.sharding else None
    return ["--split-mode", mode, "--tensor-split", tensor_split(layer_split, gpu_count)]


def tensor_split(layer_split: list[str] | None, gpu_count: int) -> str:
    """Ratios from `start-end` layer ranges reduced by their GCD (["0-24","25-39"] -> "5,3");
    an equal split when the ranges do not parse or do not match the GPU count."""
    equal = ",".join(["1"] * gpu_count)
    if not layer_split or len(layer_split) != gpu_count:
        return equal
    lengths: list[int] = []
    for entry in layer_split:
        match = _LAYER_RANGE.match(entry)
        if match is None or int(match[1]) > int(match[2]):
            return equal
        lengths.append(int(match[2]) - int(match[1]) + 1)
    divisor = reduce(gcd, lengths)
    return ",".join(str(length // divisor) for length in lengths)
