"""Where the draft weights of v0.9 `speculativeDecoding` come from, and which runtimes take it.

- `draftModel`: a file of the Model's own `spec.files`, staged beside the model file.
- `draftModelRef`: a second Model of the service's namespace, staged like the first by a second
  model downloader (`draft-model-downloader`) into the same model cache; so both Models must use
  the cache (an emptyDir per Model would need a second mount, which the reference does not plan
  either). The draft Model is read from the controller's cache and watched: its status changing
  re-plans the service.
- llama.cpp takes every type (--spec-type); vLLM takes the draft-model types and `ngram-simple`
  (its `--speculative-config`); the other runtimes have no such thing, and are told so.
"""

import posixpath
from dataclasses import dataclass

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.runtimes.llamacpp import DRAFT_WEIGHT_TYPES, spec_type
from llmkube.plan.inferenceservice.runtimes.vllm import VLLM_SPEC_METHODS
from llmkube.plan.inferenceservice.storage import ModelStorage, StorageProblem, plan_storage

FIELD = "spec.speculativeDecoding"
DRAFT_DOWNLOADER = "draft-model-downloader"


@dataclass(frozen=True)
class DraftWeights:
    path: str = ""  # the draft file as the server sees it; "" for none
    init_containers: tuple[KubeObject, ...] = ()
    volumes: tuple[KubeObject, ...] = ()


NO_DRAFT = DraftWeights()


def plan_draft(
    *,
    spec: InferenceServiceSpec,
    runtime: str,
    model: Model,
    storage: ModelStorage,
    draft_model: Model | None,
    namespace: str,
    config: OperatorConfig,
    service: str,
) -> DraftWeights | StorageProblem:
    decoding = spec.speculative_decoding
    kind = spec_type(spec)
    if decoding is None or kind == "none":
        return NO_DRAFT
    if runtime == "vllm" and decoding.type not in VLLM_SPEC_METHODS:
        supported = ", ".join(sorted(VLLM_SPEC_METHODS))
        return StorageProblem(
            f"{FIELD}.type", f'"{decoding.type}" is not a method vLLM has (use {supported})'
        )
    if runtime not in ("llamacpp", "vllm"):
        return StorageProblem(FIELD, f'runtime "{runtime}" has no speculative decoding here (llamacpp, vllm)')
    if kind not in DRAFT_WEIGHT_TYPES:
        return NO_DRAFT
    if decoding.draft_model:
        if decoding.draft_model not in (model.spec.files or []) or not storage.files_root:
            return StorageProblem(
                f"{FIELD}.draftModel",
                f'"{decoding.draft_model}" is not one of the Model\'s spec.files staged for this service',
            )
        return DraftWeights(path=posixpath.join(storage.files_root, decoding.draft_model))
    ref = decoding.draft_model_ref or ""
    if not ref:
        return NO_DRAFT  # draft-mtp: the target model carries its own draft heads
    where = f"{FIELD}.draftModelRef"
    if draft_model is None:
        return StorageProblem(where, f'Model "{ref}" not found in namespace "{namespace}"')
    if draft_model.status is None or draft_model.status.phase != "Ready":
        return StorageProblem(where, f'Model "{ref}" is not Ready yet')
    planned = plan_storage(
        namespace=namespace,
        spec=spec,
        model=draft_model,
        config=config,
        needs_model_init=True,
        service=service,
    )
    if isinstance(planned, StorageProblem):
        return StorageProblem(where, f'Model "{ref}": {planned.field}: {planned.message}')
    shared = {v["name"]: v for v in storage.volumes}
    if planned.mode != storage.mode or any(shared.get(v["name"], v) != v for v in planned.volumes):
        return StorageProblem(
            where,
            f'Model "{ref}" and the service\'s Model must be staged in the same model cache '
            f"(theirs: {planned.mode}, the service's: {storage.mode})",
        )
    if planned.mode == "pvc":  # already on a claim: mount it beside the model's
        return StorageProblem(where, f'Model "{ref}" from a pvc:// source cannot be a draft model here')
    init = tuple({**c, "name": DRAFT_DOWNLOADER} for c in planned.init_containers)
    extra = tuple(v for v in planned.volumes if v["name"] not in shared)
    return DraftWeights(path=planned.model_path, init_containers=init, volumes=extra)
