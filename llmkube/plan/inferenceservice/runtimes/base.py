"""What every runtime backend provides: its defaults (container name, image, port, probes, HPA
metric) and a process builder.

A builder is a pure function from `RuntimeInputs` to `ContainerProcess` (command, args, env); the
Deployment planner wraps that into a container. Each backend lives in its own module so its
argument list can be read, and tested flag by flag, in the reference operator's order.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec, SecretKeySelector
from llmkube.api.model import GPUSpec
from llmkube.plan.inferenceservice.command_line import has_flag
from llmkube.plan.inferenceservice.objects import compact

ProbeKind = Literal["http", "tcp"]
__all__ = ["ContainerProcess", "ProbeKind", "RuntimeDefaults", "RuntimeInputs", "has_flag", "secret_env"]


@dataclass(frozen=True)
class RuntimeDefaults:
    name: str
    container_name: str
    # The CPU build's pinned image (plan/inferenceservice/images.py chooses per GPU backend and
    # applies the admin's overrides); "" when the user must supply one.
    default_image: str
    default_port: int
    needs_model_init: bool
    hpa_metric: str
    probe: ProbeKind
    #: Where the runtime's image writes (temporary files, caches): given an emptyDir each, so the
    #: container's root filesystem can be read-only. Empty for images we do not know (the user's own,
    #: PersonaPlex): their root stays writable (plan/inferenceservice/hardening.py).
    writable_dirs: tuple[str, ...] = ()
    #: False when `hpa_metric` is only the fallback the reference uses and the runtime's server does
    #: not export it: an HPA on it never gets a value, so validation asks for spec.autoscaling.metrics.
    exports_hpa_metric: bool = True
    #: The gauges on the server's /metrics that count requests being served and waiting (what a drain
    #: before a pod stops waits on: plan/inferenceservice/drain.py). Empty: the count cannot be told.
    in_flight_metrics: tuple[str, ...] = ()
    #: the HTTP probes' paths (startup, liveness, readiness) of an `http` runtime
    probe_paths: tuple[str, str, str] = ("/health", "/health", "/health")


@dataclass(frozen=True)
class RuntimeInputs:
    spec: InferenceServiceSpec
    model_source: str
    model_path: str  # "" when the runtime gets no local model file
    port: int
    gpu_count: int
    gpu: GPUSpec | None  # the Model's GPU hardware (layers, sharding)
    #: the address the server listens on: every interface in a pod; the host agent's advertised one
    host: str = "0.0.0.0"
    #: flash attention when `spec.flashAttention` is unset: off in pods (llama.cpp decides), on for
    #: Metal, as the reference's host agent runs it
    flash_attention_default: bool = False
    mmproj_path: str = ""  # the Model's multimodal projector, staged beside the model file
    model_revision: str = ""  # hf://<org>/<repo>@<revision> resolved by the runtime: the revision
    #: the draft weights of speculative decoding (v0.9 speculativeDecoding), staged; "" for none
    draft_model_path: str = ""
    #: where a router-mode llama-server finds its models (runtime llamacpp-router)
    models_dir: str = ""


@dataclass(frozen=True)
class ContainerProcess:
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] | None = None
    env: tuple[KubeObject, ...] = ()


ProcessBuilder = Callable[[RuntimeInputs], ContainerProcess]


def secret_env(name: str, ref: SecretKeySelector) -> KubeObject:
    selector = compact({"name": ref.name, "key": ref.key, "optional": ref.optional})
    return {"name": name, "valueFrom": {"secretKeyRef": selector}}
