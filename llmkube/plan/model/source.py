"""Where a Model's weights come from (the reference operator's classification): one, used by
the Model controller, the storage planner and the warnings alike, so they can never disagree.
"""

import enum
import hashlib
import re
from dataclasses import dataclass

_HF_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9\-_./]*$")
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


class SourceKind(enum.Enum):
    PVC = "pvc"
    LOCAL = "local"
    HTTP = "http"
    HUGGINGFACE = "huggingface"
    UNKNOWN = "unknown"


def classify_source(source: str) -> SourceKind:
    """The kinds are mutually exclusive; the order of the checks is the reference's."""
    if source.startswith("pvc://"):
        return SourceKind.PVC
    if source.startswith(("file://", "/")):
        return SourceKind.LOCAL
    if source.startswith(("http://", "https://")):
        return SourceKind.HTTP
    if source and "://" not in source and "/" in source and _HF_REPO_ID.match(source):
        return SourceKind.HUGGINGFACE
    return SourceKind.UNKNOWN


def local_path(source: str) -> str:
    """The filesystem path of a local source (`file:///x` -> `/x`, `/x` -> `/x`)."""
    return source.removeprefix("file://")


@dataclass(frozen=True)
class PVCSource:
    claim: str
    path: str


def parse_pvc_source(source: str) -> PVCSource | None:
    """`pvc://<claim>/<path/in/claim>`; None when the claim or the path is empty."""
    rest = source.removeprefix("pvc://")
    claim, _, path = rest.partition("/")
    path = path.strip("/")
    if not claim or not path:
        return None
    return PVCSource(claim=claim, path=path)


def cache_key(source: str) -> str:
    """First 16 hex characters of SHA-256 of the source string: equal sources share a cache dir."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def sanitize_filename(name: str) -> str:
    """A name safe as a single path element: runs of other characters become one `-`."""
    cleaned = _UNSAFE_FILENAME.sub("-", name).strip("-.")
    return cleaned


def canonical_basename(model_name: str, gguf_model_name: str | None = None) -> str:
    """`<sanitized gguf general.name, else sanitized Model name, else "model">.gguf`, the file name
    of a model in the cache (the reference operator's)."""
    for candidate in (gguf_model_name, model_name):
        if candidate and (clean := sanitize_filename(candidate)):
            return f"{clean}.gguf"
    return "model.gguf"
