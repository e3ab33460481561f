"""I/O helpers of the Model controller: local copies into the cache, GGUF headers (local files and
remote prefixes via HTTP Range), and drift fingerprints. Results are the typed facts `plan_model` reads.
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
from llmkube.controllers.modelsource.ggufheader import (
    HeaderError,
    IncompleteHeaderError,
    NotGGUFError,
    read_gguf_metadata,
    read_gguf_metadata_or_none,
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
    "HeaderError",
    "HeaderReadOptions",
    "IncompleteHeaderError",
    "ModelSourceIO",
    "NotGGUFError",
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
    "read_gguf_metadata",
    "read_gguf_metadata_or_none",
    "read_remote_gguf_metadata",
    "remove_cached_files",
    "rename_no_replace",
    "verify_cached_file",
    "verify_cached_file_sync",
]
