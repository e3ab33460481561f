"""What a host agent does about one InferenceService it watches (its namespace and service selector
say which it watches; `--service-selector` is how several agents share a cluster).

    the service is gone, being deleted, or its Model is no longer metal   REMOVE: stop, delete the slice
    its Model is missing or not Ready (yet, or for its current spec)      KEEP: start nothing, stop nothing
    replicas: 0                                                           STOP: stop, say nothing
    a runtime, model format or source this agent cannot serve            UNSUPPORTED: stop, say why
    otherwise                                                             SERVE

KEEP follows the controller: a Model being fetched again leaves the running replicas serving.
"""

import enum
from dataclasses import dataclass

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.agent.support import unsupported
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


def assignment(isvc: InferenceService | None, model: Model | None) -> Assignment:
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
    return Assignment(Verdict.SERVE)
