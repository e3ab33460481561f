"""llmkube.kube: generic Kubernetes controller machinery (it knows nothing about LLMs).

The pieces, bottom up (each module is named after its concept):

* ``client``: :class:`ApiClient` - one aiohttp session, orjson bodies, typed errors (``errors``),
  raw REST paths from :class:`Resource` descriptors (``resource``), 429/401 handling, request counts.
* ``informer`` / ``reflector`` / ``store``: list+watch into an indexed cache, handlers get
  :class:`Change` s (DELETED may carry a :class:`Tombstone`).
* ``workqueue`` / ``queue_state`` / ``ratelimit``: client-go's workqueue contract with priorities.
* ``controller`` / ``handlers`` / ``predicates``: workers calling ``reconcile(key) -> Result``;
  :class:`Watch` says which changes wake which keys.
* ``apply`` / ``compare`` / ``managed_fields``: server-side apply only when our owned fields differ;
  ``field_policy`` / ``field_transfer``: what a kind needs beyond it (recreate, take over, hand over).
* ``leader_election`` / ``leader_state`` / ``leadership``: a Lease elector, and the write guard the
  client asks before every mutating request; ``events`` / ``event_series`` / ``event_backlog``:
  Events with series aggregation and a bounded write backlog.
* ``blocking``: blocking work in stoppable daemon threads (never holds up a shutdown).
"""

from llmkube.kube.apply import Applier, ApplyOutcome, ApplyResult
from llmkube.kube.client import DEFAULT_FIELD_MANAGER, ApiClient
from llmkube.kube.clock import Clock, FakeClock, RealClock
from llmkube.kube.controller import Controller, Result, TerminalError
from llmkube.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Expired,
    Forbidden,
    Invalid,
    NotFound,
    TooManyRequests,
)
from llmkube.kube.events import NORMAL, WARNING, EventRecorder
from llmkube.kube.field_policy import NO_POLICY, FieldPath, FieldPolicy
from llmkube.kube.handlers import Watch, enqueue_by_label, enqueue_mapped, enqueue_object, enqueue_owner
from llmkube.kube.informer import Informer
from llmkube.kube.leader_election import LeaderElector, LeadershipLost
from llmkube.kube.predicates import (
    all_of,
    annotations_changed,
    any_of,
    generation_changed,
    has_labels,
    labels_changed,
    negate,
    resource_version_changed,
)
from llmkube.kube.resource import Resource
from llmkube.kube.store import (
    BY_CONTROLLER_UID,
    BY_NAMESPACE,
    Change,
    Store,
    Tombstone,
    by_controller_uid,
    by_field,
    by_label,
    object_key,
)
from llmkube.kube.types import Obj, ObjectKey
from llmkube.kube.workqueue import LOW_PRIORITY, WorkQueue

__all__ = [
    "BY_CONTROLLER_UID",
    "BY_NAMESPACE",
    "DEFAULT_FIELD_MANAGER",
    "LOW_PRIORITY",
    "NORMAL",
    "NO_POLICY",
    "WARNING",
    "AlreadyExists",
    "ApiClient",
    "ApiError",
    "Applier",
    "ApplyOutcome",
    "ApplyResult",
    "Change",
    "Clock",
    "Conflict",
    "Controller",
    "EventRecorder",
    "Expired",
    "FakeClock",
    "FieldPath",
    "FieldPolicy",
    "Forbidden",
    "Informer",
    "Invalid",
    "LeaderElector",
    "LeadershipLost",
    "NotFound",
    "Obj",
    "ObjectKey",
    "RealClock",
    "Resource",
    "Result",
    "Store",
    "TerminalError",
    "Tombstone",
    "TooManyRequests",
    "Watch",
    "WorkQueue",
    "all_of",
    "annotations_changed",
    "any_of",
    "by_controller_uid",
    "by_field",
    "by_label",
    "enqueue_by_label",
    "enqueue_mapped",
    "enqueue_object",
    "enqueue_owner",
    "generation_changed",
    "has_labels",
    "labels_changed",
    "negate",
    "object_key",
    "resource_version_changed",
]
