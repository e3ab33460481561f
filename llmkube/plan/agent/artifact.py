"""What a service's model file is, as the agent's model store knows it now: there (`ModelFile`),
on its way (`Fetching`), or failed (`FetchFailed`, with when to try again). The store
(llmkube/agent/fetch.py) answers one of these without waiting; the service's plan reads it."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelFile:
    path: str  # what the server loads
    identity: str  # the same file, whatever path it is reached by
    size: int | None
    pass_fd: int | None = None  # a descriptor the server inherits (local sources)
    mmproj: str = ""  # the multimodal projector beside it (spec.mmproj), "" for none


@dataclass(frozen=True)
class Fetching:
    message: str


@dataclass(frozen=True)
class FetchFailed:
    reason: str
    message: str
    retry_at: float  # monotonic; inf: not until the Model changes


Artifact = ModelFile | Fetching | FetchFailed
