"""The Model controller's actions on its sources: local copies into the cache, remote GGUF headers
(prefixes via HTTP Range), drift fingerprints, the plan -> act loop and the pools its actions run in.
Results are the typed facts `plan_model` reads. What they read sources with (the egress guard, the
confined open, the GGUF header reader) is `llmkube.sources`, shared with the host agent.
"""

from llmkube.controllers.modelsource.cachefiles import (
    find_cached_file,
    place_canonically,
    remove_cached_files,
    rename_no_replace,
)
from llmkube.controllers.modelsource.executor import ModelSourceIO, PlanLoopError, drive_model_plan
from llmkube.controllers.modelsource.fingerprint import (
    probe_http_fingerprint,
    probe_local_fingerprint,
    probe_local_fingerprint_sync,
)
from llmkube.controllers.modelsource.localcopy import (
    copy_local_model,
    copy_local_model_sync,
    hash_file,
    verify_cached_file,
    verify_cached_file_sync,
)
from llmkube.controllers.modelsource.remoteheader import HeaderReadOptions, read_remote_gguf_metadata

__all__ = [
    "HeaderReadOptions",
    "ModelSourceIO",
    "PlanLoopError",
    "copy_local_model",
    "copy_local_model_sync",
    "drive_model_plan",
    "find_cached_file",
    "hash_file",
    "place_canonically",
    "probe_http_fingerprint",
    "probe_local_fingerprint",
    "probe_local_fingerprint_sync",
    "read_remote_gguf_metadata",
    "remove_cached_files",
    "rename_no_replace",
    "verify_cached_file",
    "verify_cached_file_sync",
]
