"""The enumerations of the CRDs' schemas, as Literal types.

No pydantic here: the command line offers them as choices (`typing.get_args`) without loading the
API models, and the types, the CRDs and the flags cannot disagree.
"""

from typing import Literal

# -- InferenceService (the contract's enums) -------------------------------------------------------
Runtime = Literal["llamacpp", "personaplex", "vllm", "tgi", "generic"]
Priority = Literal["critical", "high", "normal", "low", "batch"]
ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
CacheType = Literal["f16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"]
RopeScalingType = Literal["linear", "yarn", "longrope"]
MetricType = Literal["Pods", "Resource"]
Phase = Literal["Pending", "Creating", "Progressing", "Ready", "WaitingForGPU", "Stopped", "Failed"]
VLLMQuantization = Literal["awq", "gptq", "squeezellm", "fp8", "nvfp4", "compressed-tensors"]
VLLMDtype = Literal["auto", "float16", "bfloat16"]
VLLMKVCacheDtype = Literal["auto", "fp8_e5m2", "fp8_e4m3"]
AttentionBackend = Literal[
    "FLASH_ATTN", "FLASHINFER", "XFORMERS", "flashinfer", "flash_attn", "xformers", "torch_sdpa"
]
TGIQuantize = Literal["bitsandbytes", "gptq", "awq", "eetq"]
TGIDtype = Literal["float16", "bfloat16"]

# -- Model -----------------------------------------------------------------------------------------
RefreshPolicy = Literal["IfNotPresent", "OnChange"]
ModelFormat = Literal["gguf", "mlx", "safetensors", "pytorch", "custom"]
Accelerator = Literal["cpu", "metal", "cuda", "rocm", "vulkan", "intel"]
GPUVendor = Literal["nvidia", "amd", "intel"]
ShardingStrategy = Literal["layer", "tensor", "row", "pipeline", "none"]
ModelPhase = Literal["Pending", "Downloading", "Copying", "Ready", "Failed"]
