"""Where a Model's weights come from (the reference operator's classification, extended): one,
used by the Model controller, the storage planner and the warnings alike, so they can never
disagree.

| source | kind |
|---|---|
| `pvc://<claim>/<path>` | PVC |
| `file:///x`, `/x` | LOCAL |
| `http(s)://...` | HTTP |
| `hf://<org>/<repo>[@<revision>]` | HF (a Hugging Face repository) |
| `s3://<bucket>/<key or prefix>` | S3 (an S3-compatible bucket, path-style) |
| `gs://<bucket>/<object or prefix>` | GS (a Google Cloud Storage bucket, its XML API) |
| `<org>/<repo>` | HUGGINGFACE (a repo id, the same repository as `hf://<org>/<repo>`) |
"""

import enum
import hashlib
import re
from dataclasses import dataclass

_HF_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9\-_./]*$")
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")
# A Hugging Face repository: `<namespace>/<name>`, each of letters, digits, `-`, `_` and `.`.
_HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
# A git revision as the Hub takes one (a branch, a tag, a commit, `refs/pr/1`): no whitespace or
# control characters, no `..` (git refuses it, and it must never become a path).
_HF_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,255}$")
# S3's bucket naming rules (3 to 63 lowercase letters, digits, dots and hyphens).
_S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# Google Cloud Storage's (3 to 63 lowercase letters, digits, "-", "_" and "."; up to 222 with dots).
_GS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
HF_DEFAULT_REVISION = "main"


class SourceKind(enum.Enum):
    PVC = "pvc"
    LOCAL = "local"
    HTTP = "http"
    HUGGINGFACE = "huggingface"
    HF = "hf"
    S3 = "s3"
    GS = "gs"
    UNKNOWN = "unknown"


#: Sources the model downloader fetches over the network (into the cache, or an emptyDir).
REMOTE_KINDS = frozenset({SourceKind.HTTP, SourceKind.HF, SourceKind.S3, SourceKind.GS})
#: Buckets: objects at `/<bucket>/<key>` of an endpoint (S3's path style, GCS's XML API).
BUCKET_KINDS = frozenset({SourceKind.S3, SourceKind.GS})


def classify_source(source: str) -> SourceKind:
    """The kinds are mutually exclusive; the order of the checks is the reference's."""
    if source.startswith("pvc://"):
        return SourceKind.PVC
    if source.startswith(("file://", "/")):
        return SourceKind.LOCAL
    if source.startswith(("http://", "https://")):
        return SourceKind.HTTP
    if source.startswith("hf://"):
        return SourceKind.HF
    if source.startswith("s3://"):
        return SourceKind.S3
    if source.startswith("gs://"):
        return SourceKind.GS
    if source and "://" not in source and "/" in source and _HF_REPO_ID.match(source):
        return SourceKind.HUGGINGFACE
    return SourceKind.UNKNOWN


@dataclass(frozen=True)
class HFSource:
    repo: str
    revision: str = HF_DEFAULT_REVISION


def parse_hf_source(source: str) -> HFSource | str:
    """`hf://<org>/<repo>[@<revision>]` (or the bare repo id `<org>/<repo>`); else what is wrong."""
    rest = source.removeprefix("hf://")
    repo, at, revision = rest.partition("@")
    if not _HF_REPO.match(repo) or ".." in repo:
        return f'"{source}" does not name a Hugging Face repository: want hf://<org>/<repo>[@<revision>]'
    if at and (not _HF_REVISION.match(revision) or ".." in revision or "//" in revision):
        return f'"{source}": "{revision}" is not a revision (a branch, a tag or a commit)'
    return HFSource(repo=repo, revision=revision or HF_DEFAULT_REVISION)


@dataclass(frozen=True)
class S3Source:
    bucket: str
    key: str  # the object's key, or the prefix of spec.files ("" for the bucket's root)


def parse_s3_source(source: str, *, prefix: bool) -> S3Source | str:
    """`s3://<bucket>/<key>` (or `gs://<bucket>/<object>`); with `prefix` (spec.files names the
    objects) the key is a prefix and may be empty. Else what is wrong."""
    scheme, _, rest = source.partition("://")
    bucket, _, key = rest.partition("/")
    if scheme == "gs" and not _GS_BUCKET.match(bucket):
        return (
            f'"{source}": "{bucket}" is not a Cloud Storage bucket name '
            '(3-63 lowercase letters, digits, "-", "_" and ".")'
        )
    if scheme != "gs" and not _S3_BUCKET.match(bucket):
        return (
            f'"{source}": "{bucket}" is not an S3 bucket name (3-63 lowercase letters, digits, "." and "-")'
        )
    key = key.strip("/") if prefix else key
    if not prefix and (not key or key.endswith("/")):
        return (
            f'"{source}" names no object: want {scheme}://<bucket>/<key>, or list the objects in spec.files'
        )
    if any(part in ("", ".", "..") for part in key.split("/")) and key:
        return f'"{source}": the key "{key}" has an empty, "." or ".." part'
    return S3Source(bucket=bucket, key=key)


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


@dataclass(frozen=True)
class RuntimeModel:
    """What a runtime that resolves repositories itself (vLLM, TGI) is told to load."""

    model_id: str  # the source, or the repository of hf://<org>/<repo>
    revision: str = ""  # hf://...@<revision>: its --revision


def runtime_model(source: str) -> RuntimeModel:
    if classify_source(source) is SourceKind.HF:
        hf = parse_hf_source(source)
        if isinstance(hf, HFSource):
            pinned = "@" in source
            return RuntimeModel(hf.repo, hf.revision if pinned else "")
    return RuntimeModel(source)
