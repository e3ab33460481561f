"""The enumerations of the CRDs' schemas, as Literal types.

No pydantic here: the command line offers them as choices (`typing.get_args`) without loading the
API models, and the types, the CRDs and the flags cannot disagree.
"""

from typing import Literal

# -- InferenceService (the contract's enums, and the members v0.9 added: llmkube/api/isvc_additions.py)
Runtime = Literal["llamacpp", "personaplex", "vllm", "tgi", "generic", "llamacpp-router", "sglang"]
Priority = Literal["critical", "high", "normal", "low", "batch"]
ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
CacheType = Literal["f16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"]
RopeScalingType = Literal["linear", "yarn", "longrope"]
MetricType = Literal["Pods", "Resource"]
Phase = Literal[
    "Pending", "Creating", "Progressing", "Ready", "WaitingForGPU", "Stopped", "Failed", "Suspended"
]
VLLMQuantization = Literal["awq", "gptq", "squeezellm", "fp8", "nvfp4", "compressed-tensors"]
VLLMDtype = Literal["auto", "float16", "bfloat16"]
VLLMKVCacheDtype = Literal["auto", "fp8_e5m2", "fp8_e4m3"]
AttentionBackend = Literal[
    "FLASH_ATTN", "FLASHINFER", "XFORMERS", "flashinfer", "flash_attn", "xformers", "torch_sdpa"
]
TGIQuantize = Literal["bitsandbytes", "gptq", "awq", "eetq"]
TGIDtype = Literal["float16", "bfloat16"]
# -- InferenceService fields added in v0.9 ----------------------------------------------------------
ServingMode = Literal["chat", "embedding", "rerank"]
SpeculativeDecodingType = Literal[
    "none", "disabled", "mtp", "draft", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash",
    "draft-dspark", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
]  # fmt: skip
ModelCachePersistence = Literal["Cached", "Ephemeral"]
SGLangKVCacheDtype = Literal["auto", "fp8_e5m2", "fp8_e4m3"]
SGLangAttentionBackend = Literal["flashinfer", "flash_attn", "torch_native"]
SGLangToolCallParser = Literal["llama3", "qwen3", "qwen25", "hermes", "functionary", "mistral"]
SGLangReasoningParser = Literal["qwen3", "deepseek-r1"]
SGLangSpeculativeAlgorithm = Literal["EAGLE", "EAGLE3", "Medusa"]
SGLangLogLevel = Literal["debug", "info", "warning", "error"]
GPUSharingMode = Literal["exclusive", "shared", "partitioned"]
SLOIndicator = Literal["availability", "latency"]

# -- Model -----------------------------------------------------------------------------------------
RefreshPolicy = Literal["IfNotPresent", "OnChange"]
ModelFormat = Literal["gguf", "mlx", "safetensors", "pytorch", "custom"]
Accelerator = Literal["cpu", "metal", "cuda", "rocm", "vulkan", "intel"]
GPUVendor = Literal["nvidia", "amd", "intel"]
GPURuntime = Literal["vulkan", "rocm"]
ShardingStrategy = Literal["layer", "tensor", "row", "pipeline", "none"]
ModelPhase = Literal["Pending", "Downloading", "Copying", "Ready", "Failed"]
