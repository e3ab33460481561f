"""A whole Hugging Face repository (`hf://<org>/<repo>[@<revision>]`, or the repo id `<org>/<repo>`)
with no `files` listed: the runtime resolves it (vLLM, TGI), so the Model is Ready as soon as its
source is one. With `files` the same repository's files are the downloader's (sources/downloaded.py)."""

from llmkube.plan.model import conditions as cond
from llmkube.plan.model.decision import ModelDecision
from llmkube.plan.model.inputs import PlanInputs
from llmkube.plan.model.phases import invalid_source, runtime_resolved
from llmkube.plan.model.source import SourceKind, classify_source, parse_hf_source


def plan_repository(inputs: PlanInputs) -> ModelDecision:
    if classify_source(inputs.source) is SourceKind.HF:
        parsed = parse_hf_source(inputs.source)
        if isinstance(parsed, str):
            return invalid_source(inputs, parsed)
    return runtime_resolved(inputs, cond.RUNTIME_RESOLVED, cond.MSG_RUNTIME_RESOLVED)
