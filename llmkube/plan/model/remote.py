"""The files of a remote Model (http(s), hf://, s3://) and where each one is fetched from.

The Model controller's reads (HEAD, the GGUF header's Range requests), the model downloader of
the inference pods and the prefetch Job all take the files from here, so they fetch the same
bytes and put them at the same place:

| source | files | fetched from |
|---|---|---|
| `https://host/m.gguf` | none | that URL, stored as `<Model name>.gguf` |
| `https://host/dir` | listed | `https://host/dir/<file>` |
| `hf://org/repo@rev` | listed | `<Hub>/org/repo/resolve/rev/<file>` (the Hub's file API) |
| `s3://bucket/key` | none | `<endpoint>/bucket/key`, stored as `<Model name>.gguf` |
| `s3://bucket/prefix` | listed | `<endpoint>/bucket/prefix/<file>` (path-style, SigV4) |
| `gs://bucket/object` | none | `<endpoint>/bucket/object` (Cloud Storage's XML API), as s3:// |
| `gs://bucket/prefix` | listed | `<endpoint>/bucket/prefix/<file>` |

The Hub is `--hf-endpoint` (huggingface.co by default, a mirror in an air-gapped site); an S3
endpoint is the `AWS_ENDPOINT_URL` of the Model's Secret, so for S3 only the path is known here;
likewise Cloud Storage's (`https://storage.googleapis.com`, or the Secret's `GCS_ENDPOINT_URL`).
A Hugging Face repository without `files` is the runtime's to resolve (vLLM, TGI): not remote here.
"""

from dataclasses import dataclass, replace
from urllib.parse import quote

from llmkube.api.model import DEFAULT_WEB_IDENTITY_AUDIENCE, Model
from llmkube.plan.model.fileset import FileSetProblem, StagingPlan, staging_plan
from llmkube.plan.model.source import (
    BUCKET_KINDS,
    SourceKind,
    canonical_basename,
    classify_source,
    parse_hf_source,
    parse_s3_source,
)

DEFAULT_HF_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class RemoteFile:
    #: the path below the Model's cache directory (a staged file, or the single file's name)
    dest: str
    #: the http(s) URL (http, hf); for s3 the path-style path `/bucket/key`, after the endpoint
    location: str


@dataclass(frozen=True)
class WebIdentityRole:
    """spec.webIdentity of an s3:// Model: the role the downloader assumes with the pod's token."""

    role_arn: str
    audience: str


@dataclass(frozen=True)
class RemoteSource:
    kind: SourceKind  # HTTP, HF or S3
    files: tuple[RemoteFile, ...]  # the primary (what the runtime loads) first
    mmproj: str | None = None  # the dest of the projector, when there is one
    #: sourceSecretRef's name ("" without one): its keys go to the downloader
    secret: str = ""
    staged: tuple[str, ...] = ()  # status.stagedFiles: the listed files and the projector
    #: spec.webIdentity (s3:// only): the pod's ServiceAccount token is exchanged for the keys
    identity: WebIdentityRole | None = None

    @property
    def primary(self) -> RemoteFile:
        return self.files[0]


def hf_file_url(endpoint: str, repo: str, revision: str, path: str) -> str:
    """The Hub's download URL of one file (huggingface_hub's `hf_hub_url`): the revision is one
    path segment (`refs/pr/1` becomes `refs%2Fpr%2F1`), the file's path keeps its slashes."""
    return f"{endpoint.rstrip('/')}/{repo}/resolve/{quote(revision, safe='')}/{quote(path)}"


def s3_object_path(bucket: str, key: str) -> str:
    """`/bucket/key`, each part of the key URI-encoded as SigV4 signs it."""
    return f"/{bucket}/{quote(key, safe='/-_.~')}"


def _joined(prefix: str, path: str) -> str:
    return f"{prefix}/{path}" if prefix else path


def remote_source(
    model: Model, hf_endpoint: str = DEFAULT_HF_ENDPOINT
) -> RemoteSource | FileSetProblem | None:
    """The remote files of `model`, or what makes its file list unusable; None for a source that
    is not fetched over the network by the downloader (pvc, local, a repository the runtime resolves)."""
    spec = model.spec
    kind = classify_source(spec.source)
    plan = staging_plan(spec)
    if isinstance(plan, FileSetProblem):
        return plan
    if kind is SourceKind.HUGGINGFACE:
        kind = SourceKind.HF if plan is not None else kind  # `org/repo` with files: the same repository
    if kind not in (SourceKind.HTTP, SourceKind.HF, SourceKind.S3, SourceKind.GS):
        return None
    secret = (spec.source_secret_ref.name or "") if spec.source_secret_ref else ""
    if spec.web_identity is not None and kind is not SourceKind.S3:
        return FileSetProblem("spec.webIdentity", "only s3:// sources are read with a web identity")
    if kind is SourceKind.HF:
        if plan is None:
            return None  # the whole repository: the runtime resolves it
        hf = parse_hf_source(spec.source)
        if isinstance(hf, str):
            return FileSetProblem("spec.source", hf)
        files = [
            RemoteFile(path, hf_file_url(hf_endpoint, hf.repo, hf.revision, path)) for path in plan.files
        ]
        return _source(kind, files, plan, secret)
    if kind in BUCKET_KINDS:
        s3 = parse_s3_source(spec.source, prefix=plan is not None)
        if isinstance(s3, str):
            return FileSetProblem("spec.source", s3)
        identity = (
            WebIdentityRole(
                spec.web_identity.role_arn, spec.web_identity.audience or DEFAULT_WEB_IDENTITY_AUDIENCE
            )
            if spec.web_identity is not None
            else None
        )
        if plan is None:
            single = RemoteFile(
                canonical_basename(model.metadata.name or ""), s3_object_path(s3.bucket, s3.key)
            )
            return RemoteSource(kind, (single,), secret=secret, identity=identity)
        files = [RemoteFile(path, s3_object_path(s3.bucket, _joined(s3.key, path))) for path in plan.files]
        return replace(_source(kind, files, plan, secret), identity=identity)
    if plan is None:
        single = RemoteFile(canonical_basename(model.metadata.name or ""), spec.source)
        return RemoteSource(kind, (single,), secret=secret)
    base = spec.source.rstrip("/")
    return _source(kind, [RemoteFile(path, f"{base}/{quote(path)}") for path in plan.files], plan, secret)


def _source(kind: SourceKind, files: list[RemoteFile], plan: StagingPlan, secret: str) -> RemoteSource:
    return RemoteSource(kind, tuple(files), mmproj=plan.mmproj, secret=secret, staged=plan.files)
