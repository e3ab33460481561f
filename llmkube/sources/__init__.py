"""Model sources, read safely: what the Model controller and the host agent both do to a source a
tenant names (llmkube.controllers.modelsource builds the controller's actions on it, llmkube.agent
its downloads and local files).

* ``egress``: every connection to a source obeys the egress rules (`llmkube.plan.model.egress`):
  a guarded resolver, address literals checked, each redirect checked before it is followed;
* ``cluster_addresses``: what the cluster says about its own addresses (the API server, the
  Service and Pod networks), which those rules keep sources away from;
* ``confined``: a local source opened without following a symbolic link out of the local roots;
* ``bounded_read``: an answer's body read up to a bound;
* ``ggufheader``: a GGUF header's key/values, read within bounds (the source's owner wrote it).

It imports pure planning, the kube machinery's client and the API types; nothing of the
controllers' or the agent's processes.
"""

from llmkube.sources.bounded_read import read_bounded
from llmkube.sources.cluster_addresses import ClusterAddresses
from llmkube.sources.confined import EscapesRoots, open_beneath_roots
from llmkube.sources.egress import (
    MAX_REDIRECTS,
    GuardedResolver,
    PolicySource,
    SourceNotAllowed,
    TooManyRedirects,
    open_checked,
    refused,
)
from llmkube.sources.ggufheader import (
    MAX_HEADER_BYTES,
    HeaderError,
    HeaderTooLargeError,
    IncompleteHeaderError,
    NotGGUFError,
    read_gguf_metadata,
    read_gguf_metadata_or_none,
)

__all__ = [
    "MAX_HEADER_BYTES",
    "MAX_REDIRECTS",
    "ClusterAddresses",
    "EscapesRoots",
    "GuardedResolver",
    "HeaderError",
    "HeaderTooLargeError",
    "IncompleteHeaderError",
    "NotGGUFError",
    "PolicySource",
    "SourceNotAllowed",
    "TooManyRedirects",
    "open_beneath_roots",
    "open_checked",
    "read_bounded",
    "read_gguf_metadata",
    "read_gguf_metadata_or_none",
    "refused",
]
