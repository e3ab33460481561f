"""What plan_model returns: the status to write, the one action to perform next, and when to come back."""

import enum
from dataclasses import dataclass, field
from datetime import timedelta

from llmkube.api.base import KubeObject
from llmkube.api.model import ModelStatus
from llmkube.apimachinery.proxy import DIRECT, ProxyConfig
from llmkube.plan.model.remote import DEFAULT_HF_ENDPOINT
from llmkube.plan.model.source import SourceKind

DEFAULT_CACHE_PATH = "/models"
DEFAULT_REVALIDATE_INTERVAL = timedelta(hours=1)
DEFAULT_INTEL_GPU_RESOURCE = "gpu.intel.com/i915"

# The reference operator's intervals.
PVC_NOT_FOUND_REQUEUE = timedelta(seconds=30)
PVC_NOT_BOUND_REQUEUE = timedelta(seconds=10)
# Unrecoverable fetch errors retry on this fixed interval instead of the rate limiter, whose first
# retries come milliseconds apart (the reference operator spun at 100% CPU on a missing file).
FETCH_FAILURE_REQUEUE = timedelta(minutes=5)
# While a prefetch Job downloads: how often its progress is read into status.
PREFETCH_PROGRESS_REQUEUE = timedelta(seconds=10)
# While the prefetch Job cannot create its pod: looked at again after as long as it has been
# waiting, within these bounds (the Job's own status changes bring the Model back sooner).
PREFETCH_REFUSED_MIN_REQUEUE = timedelta(seconds=5)
PREFETCH_REFUSED_MAX_REQUEUE = timedelta(seconds=60)


@dataclass(frozen=True)
class ModelPlanConfig:
    """Operator-level settings (the reference operator's flags) the Model planner depends on."""

    cache_path: str = DEFAULT_CACHE_PATH  # --model-cache-path; "" means the default
    revalidate_interval: timedelta = DEFAULT_REVALIDATE_INTERVAL  # --model-revalidate-interval
    intel_gpu_resource: str = DEFAULT_INTEL_GPU_RESOURCE  # LLMKUBE_INTEL_GPU_RESOURCE
    # Read the GGUF header of http(s) sources with Range requests before the first Ready.
    read_remote_gguf: bool = True
    # --model-local-roots, normalized (local_roots.normalized_roots): the only directories local
    # sources may be read from. Empty (the default) refuses every local source the controller would read.
    local_source_roots: tuple[str, ...] = ()
    # --hf-endpoint: the Hub (or its mirror) hf:// files come from.
    hf_endpoint: str = DEFAULT_HF_ENDPOINT
    # The proxies the model downloader goes through (OperatorConfig.download_proxy's).
    download_proxy: ProxyConfig = DIRECT
    # What a prefetch Job needs: the namespace's model cache (off when --model-cache-path is
    # empty), the downloader's image, the pods' fsGroup and the custom CA.
    namespace_cache: bool = True
    downloader_image: str = "docker.io/curlimages/curl:8.18.0"
    default_fsgroup: int = 102
    ca_cert_configmap: str = ""

    @property
    def effective_cache_path(self) -> str:
        return self.cache_path or DEFAULT_CACHE_PATH


class ActionKind(enum.Enum):
    NONE = "None"
    COPY_LOCAL = "CopyLocal"  # copy the local source into the cache directory
    VERIFY = "Verify"  # hash / parse / canonically rename a file already in the cache
    PROBE_FINGERPRINT = (
        "ProbeFingerprint"  # HEAD (http) or stat (local) the source; optionally read the header
    )
    REFETCH = "Refetch"  # delete the cached *.gguf files, then copy again
    # http: read the GGUF header again, after a probe found that a file the controller had
    # refused changed (the probe's result is already among the facts)
    READ_HEADER = "ReadHeader"
    # hf:// with spec.quantization and no spec.files: the Hub's file list of the repository
    # (`source` is its API URL), from which the planner chooses the files
    LIST_REPOSITORY = "ListRepository"


@dataclass(frozen=True)
class ActionTarget:
    """What an action is about: the spec's source and sha256 when it was planned. Its result, and
    the action itself while it runs, are facts about a Model whose spec still says the same."""

    source: str
    sha256: str | None = None


@dataclass(frozen=True)
class ModelAction:
    kind: ActionKind = ActionKind.NONE
    source_kind: SourceKind | None = None
    source: str = ""  # the local path (file:// stripped) or the URL
    model_dir: str = ""  # <cache>/<cacheKey>
    model_name: str = ""  # metadata.name: the canonical file name falls back to it
    cached_path: str = ""  # VERIFY: the file to verify
    expected_sha256: str | None = None  # COPY_LOCAL / REFETCH / VERIFY: spec.sha256
    hash_file: bool = True  # VERIFY: False when status already holds this file's hash
    read_header: bool = False  # PROBE_FINGERPRINT (http): also read the GGUF header with Range requests
    target: ActionTarget | None = None  # the spec it was planned for
    # Remote sources: every file's location (the model file's first, `source` is that one): a
    # probe sizes them all; S3 locations are paths after the endpoint of the Model's Secret.
    locations: tuple[str, ...] = ()
    #: hf or s3: how requests are made (the Hub's token, SigV4)
    remote_kind: SourceKind | None = None
    #: sourceSecretRef: the Secret whose keys sign the requests ("" for none), and its namespace
    secret: str = ""
    namespace: str = ""
    #: spec.webIdentity's role: the pod's identity signs the requests, which the controller lacks
    identity: str = ""


NO_ACTION = ModelAction()


@dataclass(frozen=True)
class Requeue:
    """`after` is a timed requeue; `backoff` hands the key to the work queue's rate limiter instead."""

    after: timedelta | None = None
    backoff: bool = False


NO_REQUEUE = Requeue()
BACKOFF = Requeue(backoff=True)


@dataclass(frozen=True)
class PrefetchPlan:
    """The prefetch Jobs a Model wants: `job` created when missing (a Job is never changed: a new
    spec gets a Job of a new name), `deletes` (name, uid) removed; the namespace's model cache claim
    must exist for it."""

    job: KubeObject | None = None
    deletes: tuple[tuple[str, str], ...] = ()
    #: delete with foreground propagation: the Job is gone only once its pods are, so nothing of it
    #: still writes into the cache (a cache clear waits for that)
    foreground: bool = False


@dataclass(frozen=True)
class ModelDecision:
    """The next step. While `action` is not NONE the status is provisional (e.g. `Copying`) and the
    caller performs the action, adds its result to the facts and plans again; `requeue` and
    `error` are only meaningful once `action` is NONE.

    `waiting`: an action for this spec is in flight (`ModelFacts.pending`); nothing is decided
    until its result arrives, and whoever runs it brings the Model back then.
    """

    status: ModelStatus
    action: ModelAction = NO_ACTION
    requeue: Requeue = field(default=NO_REQUEUE)
    error: str | None = None  # set with requeue.backoff: the failure to log and count
    waiting: bool = False
    prefetch: PrefetchPlan | None = None
    #: the cache clear's Job to create and stale ones to delete (plan/model/cache_clear.py)
    cache_clear: PrefetchPlan | None = None
