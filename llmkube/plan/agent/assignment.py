"""What a host agent does about one InferenceService it watches (its namespace and service selector
say which it watches; `--service-selector` is how several agents share a cluster).

    the service is gone, being deleted, or its Model is no longer metal   REMOVE: stop, delete the slice
    its Model is missing or not Ready (yet, or for its current spec)      KEEP: start nothing, stop nothing
    replicas: 0                                                           STOP: stop, say nothing
    a runtime, model format or source this agent cannot serve            UNSUPPORTED: stop, say why
    an extraArg the agent does not pass to llama-server (server_flags)   UNSUPPORTED: stop, say which
    the controller has not judged its spec yet, or refused it             KEEP (the refusal is its status)
    otherwise                                                             SERVE, at the accepted priority

KEEP follows the controller: a Model being fetched again, or a new spec the controller refused,
leaves the running replicas serving what was accepted before. The agent never judges a spec against
the admin's rules itself: it serves what the controller accepted (agent_verdict.py), at the priority
the controller resolved for it, so a spec the controller refused (a priority class above the
namespace's ceiling, a field the admin forbids) is never started and never evicts anyone.
"""

import enum
from collections.abc import Collection
from dataclasses import dataclass

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.agent.launch import Host, extra_args_refusal
from llmkube.plan.agent.support import unsupported
from llmkube.plan.inferenceservice.agent_verdict import verdict_of
from llmkube.plan.inferenceservice.current_model import describes_current_spec
from llmkube.plan.inferenceservice.gpu import is_metal


class Verdict(enum.Enum):
    REMOVE = "remove"
    KEEP = "keep"
    STOP = "stop"
    UNSUPPORTED = "unsupported"
    SERVE = "serve"


@dataclass(frozen=True)
class Assignment:
    verdict: Verdict
    message: str = ""
    #: the effective priority the controller accepted (SERVE only)
    priority: int = 0


def assignment(
    isvc: InferenceService | None,
    model: Model | None,
    host: Host,
    *,
    unrestricted_namespaces: Collection[str] = (),
) -> Assignment:
    """`unrestricted_namespaces`: where the admin lets services pass every llama-server flag but
    the agent's own (`--unrestricted-server-flags`)."""
    if isvc is None or isvc.metadata.deletion_timestamp is not None:
        return Assignment(Verdict.REMOVE)
    if model is None or model.status is None or model.status.phase != "Ready":
        return Assignment(Verdict.KEEP)
    if not describes_current_spec(model):  # a status of the Model's previous spec says nothing yet
        return Assignment(Verdict.KEEP)
    if not is_metal(model):
        return Assignment(Verdict.REMOVE)
    if isvc.spec.replicas == 0:
        return Assignment(Verdict.STOP)
    if (why := unsupported(isvc, model)) is not None:
        return Assignment(Verdict.UNSUPPORTED, why)
    unrestricted = (isvc.metadata.namespace or "") in unrestricted_namespaces
    if (why := extra_args_refusal(isvc, model, host, unrestricted=unrestricted)) is not None:
        return Assignment(Verdict.UNSUPPORTED, why)
    judged = verdict_of(isvc)
    if judged.accepted is not True:
        return Assignment(Verdict.KEEP, judged.message)
    return Assignment(Verdict.SERVE, priority=judged.priority)
