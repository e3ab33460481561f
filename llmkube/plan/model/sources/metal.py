"""A Model on Apple Silicon (`hardware.accelerator: metal`): its host agent, off the cluster, gets
the weights itself. It downloads http(s) files and Hugging Face repositories (it signs no S3
request), stages `files` only from a Hugging Face repository (its http(s) sources are one file),
and loads a local path on its host as it is. A metal Model's pvc:// and repository sources, and
its downloads (sources/downloaded.py, without a prefetch Job), are planned as anyone's."""

from llmkube.plan.model import conditions as cond
from llmkube.plan.model.decision import ModelDecision
from llmkube.plan.model.inputs import PlanInputs
from llmkube.plan.model.phases import runtime_resolved
from llmkube.plan.model.remote import RemoteSource
from llmkube.plan.model.source import SourceKind

#: the remote sources the host agent downloads itself
FETCHED = frozenset({SourceKind.HTTP, SourceKind.HF})
#: the sources it stages `files` from
STAGED = frozenset({SourceKind.HF, SourceKind.HUGGINGFACE})


def remote_refusal(inputs: PlanInputs, remote: RemoteSource) -> str | None:
    """Why the host agent cannot fetch this remote source, or None."""
    if remote.kind in FETCHED:
        return None
    return cond.msg_metal_http_only(inputs.source)


def plan_agent_local(inputs: PlanInputs) -> ModelDecision:
    """A local path on the metal host: the host agent loads it, the controller reads nothing."""
    return runtime_resolved(inputs, cond.METAL_AGENT_MANAGED, cond.MSG_METAL_AGENT_MANAGED)
