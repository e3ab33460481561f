"""What the Model controller observed, and what its I/O helpers reported back.

These are the inputs of `plan_model`. The helpers in `llmkube.controllers.modelsource` build them;
the planner only reads them, so every branch of the decision can be tested with plain values.
"""

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from llmkube.api.model import GGUFMetadata
from llmkube.plan.model.decision import ActionTarget, ModelAction


@dataclass(frozen=True)
class Fingerprint:
    """What identifies the upstream bytes: the HTTP ETag and/or the size (Content-Length or stat size).

    For a Model that stages several files, the ETag is the model file's and the size is every
    file's together: a change of any of them is a change of the Model."""

    etag: str | None = None
    content_length: int | None = None

    @property
    def determinate(self) -> bool:
        return bool(self.etag) or bool(self.content_length)


class ProbeFailure(enum.Enum):
    NOT_FOUND = "NotFound"  # HTTP 404, or the local source file is gone
    SERVER_ERROR = "ServerError"  # HTTP 5xx
    UNEXPECTED_STATUS = "UnexpectedStatus"  # any other non-200 answer
    TIMEOUT = "Timeout"
    CONNECTION = "Connection"  # DNS, refused, reset, TLS, invalid URL
    NO_FINGERPRINT = "NoFingerprint"  # 200 without an ETag or a usable Content-Length
    PERMISSION_DENIED = "PermissionDenied"
    IO_ERROR = "IOError"
    # The egress policy refused the host (or a host it redirected to): nothing was sent to it.
    NOT_ALLOWED = "NotAllowed"
    UNAUTHORIZED = "Unauthorized"  # HTTP 401 or 403: the source refused these credentials (or none)
    # The Model names a Secret (sourceSecretRef) the controller may not read: it sends nothing
    # without the credentials (docs/models.md says how a namespace lets it read one).
    CREDENTIALS_UNREADABLE = "CredentialsUnreadable"
    SECRET_NOT_FOUND = "SecretNotFound"  # the Secret it names does not exist


@dataclass(frozen=True)
class ProbeOutcome:
    """The result of one fingerprint probe (HTTP HEAD or a local stat).

    A failed probe is *indeterminate*: it never counts as drift.
    """

    fingerprint: Fingerprint | None = None
    failure: ProbeFailure | None = None
    detail: str = ""


class FetchFailure(enum.Enum):
    NOT_FOUND = "NotFound"  # ENOENT / ENOTDIR: the path is not there (or not visible to the controller pod)
    PERMISSION_DENIED = "PermissionDenied"  # EACCES / EPERM
    NOT_A_FILE = "NotAFile"  # a directory, a device, ...
    SIZE_MISMATCH = "SizeMismatch"  # fewer or more bytes than the source announced
    INTEGRITY_MISMATCH = "IntegrityMismatch"  # SHA-256 differs from spec.sha256 (the copy was deleted)
    IO_ERROR = "IOError"  # anything else (disk full, EIO, ...): possibly transient
    # A symbolic link (or a directory swapped for one) leads out of --model-local-roots.
    ESCAPES_ROOTS = "EscapesRoots"


@dataclass(frozen=True)
class FetchError:
    kind: FetchFailure
    message: str


@dataclass(frozen=True)
class StoredFile:
    """A model file that now sits in the controller's cache, as a copy or a verification found it."""

    path: str
    size: int
    sha256: str | None  # None when the verification was asked not to hash
    gguf: GGUFMetadata | None  # None when the header could not be parsed (non-fatal)
    source_size: int | None = None  # size of the source at copy time: the drift baseline


class HeaderFailure(enum.Enum):
    RANGES_UNSUPPORTED = "RangesUnsupported"  # the server answered a Range request with the whole body
    HTTP_STATUS = "HTTPStatus"
    TIMEOUT = "Timeout"
    CONNECTION = "Connection"
    TRUNCATED = "Truncated"  # the body was shorter than the server announced
    UNKNOWN_SIZE = "UnknownSize"  # Content-Range without a total size
    # What the file says, which the same file will say again (until it changes):
    NOT_GGUF = "NotGGUF"  # not a GGUF file, or a header no GGUF reader accepts
    HEADER_TOO_LARGE = "HeaderTooLarge"  # the header runs past the reader's bound
    # A Range answer no file can give (a total beyond an int64, a range outside the total).
    INVALID_RESPONSE = "InvalidResponse"
    IO_ERROR = "IOError"
    NOT_ALLOWED = "NotAllowed"  # the egress policy refused the host or a redirect
    CREDENTIALS_UNREADABLE = "CredentialsUnreadable"  # not read: see ProbeFailure


@dataclass(frozen=True)
class RemoteHeader:
    """GGUF metadata read from the first bytes of a remote file (or why it is unavailable)."""

    metadata: GGUFMetadata | None = None
    failure: HeaderFailure | None = None
    detail: str = ""
    bytes_fetched: int = 0
    http_status: int | None = None  # HTTP_STATUS: the answer's status code
    file_size: int | None = None  # the file's size, as the Range answers gave it


@dataclass(frozen=True)
class CachedFile:
    """A `*.gguf` file found in the Model's cache directory (chosen as the reference operator does:
    the canonical name, else the legacy `model.gguf`, else the first by name)."""

    path: str
    size: int

    @property
    def basename(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class ListingFailure(enum.Enum):
    """Why the Hub did not give a repository's file list (the Model names a quantization)."""

    NOT_FOUND = "NotFound"  # 404: no such repository or revision
    UNAUTHORIZED = "Unauthorized"  # 401 or 403: private or gated (the controller sends no token)
    UNEXPECTED_STATUS = "UnexpectedStatus"  # any other answer than 200
    TOO_LARGE = "TooLarge"  # longer than the bound on a file list
    NOT_A_LISTING = "NotAListing"  # 200, but not the Hub's JSON
    TIMEOUT = "Timeout"
    CONNECTION = "Connection"
    NOT_ALLOWED = "NotAllowed"  # the egress policy refused the Hub's host or a redirect


@dataclass(frozen=True)
class HubListing:
    """A Hugging Face repository's files at a revision, as the Hub listed them (or why it did not)."""

    files: tuple[str, ...] = ()
    failure: ListingFailure | None = None
    detail: str = ""


CopyResult = StoredFile | FetchError

PrefetchPhase = Literal["Running", "Succeeded", "Failed"]


@dataclass(frozen=True)
class PrefetchJob:
    """A prefetch Job of the Model, as the Job cache shows it (and its pod's progress)."""

    name: str
    uid: str
    phase: PrefetchPhase
    #: the downloader's last line (its termination message), or the Job's failure condition
    message: str = ""
    received: int | None = None  # while it runs: the last progress line of its log
    total: int | None = None
    #: while it has no pod: the API server's refusal of the pod the Job controller tried to
    #: create (its latest FailedCreate Event), or ""
    pod_refusal: str = ""


@dataclass(frozen=True)
class ClearFacts:
    """What a cache clear needs beyond the Model (plan/model/cache_clear.py): its clear Jobs, as
    the Job cache shows them, the services of its namespace that name it, and whether the
    namespace's model cache claim exists."""

    jobs: tuple[PrefetchJob, ...] = ()
    services: tuple[str, ...] = ()
    claim_exists: bool = False


@dataclass(frozen=True)
class ModelFacts:
    """Everything plan_model needs besides the Model itself.

    The observed part comes from the informer cache and a directory listing; `probe`,
    `remote_header`, `copy` and `verify` are the results of actions performed earlier in the same
    reconcile, or of an action that ran in the background since the last one (`results_for` then
    names the spec it ran for: results for another spec are ignored). `pending` is an action in
    flight. The planner never asks for an action whose result is already here, so the
    observe → decide → act loop always ends.
    """

    pvc_phase: str | None = None  # pvc:// sources: the claim's status.phase; None when it does not exist
    cached_file: CachedFile | None = None  # local sources: what the cache directory holds
    # Summed node capacity per extended resource name; None when listing nodes failed (fail open).
    gpu_capacity: Mapping[str, int] | None = None
    # Whether the Model's namespace may use local sources (its label; plan/tenancy.py).
    local_sources_allowed: bool = False
    probe: ProbeOutcome | None = None
    remote_header: RemoteHeader | None = None
    copy: CopyResult | None = None
    verify: CopyResult | None = None
    #: the Hub's file list of a repository the Model names a quantization of
    hub_listing: HubListing | None = None
    results_for: ActionTarget | None = None  # None: this reconcile's own, for the current spec
    pending: ModelAction | None = None
    prefetch_jobs: tuple[PrefetchJob, ...] = ()  # the Model's prefetch Jobs
    clear: ClearFacts = ClearFacts()  # for `llmkube cache clear`
