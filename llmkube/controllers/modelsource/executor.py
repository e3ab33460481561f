"""Perform what plan_model asked for, and run the plan → act loop of one Model reconcile.

The controller observes (informer cache: PVC phase, node GPU capacity; `observe_cached_file` for
the cache directory), then calls `drive_model_plan`, which alternates pure decisions and these
helpers until nothing is left to do, writing status only when it changed. The controller's
performer (background.py) does not wait for an action: it starts it as a task of its own and
the loop ends; the action's result is a fact of the Model's next reconcile.
"""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Protocol

import aiohttp

from llmkube.api.model import Model, ModelStatus
from llmkube.controllers.modelsource.cachefiles import find_cached_file, remove_cached_files
from llmkube.controllers.modelsource.fingerprint import (
    DEFAULT_PROBE_TIMEOUT,
    default_policy,
    probe_http_fingerprint,
    probe_local_fingerprint,
)
from llmkube.controllers.modelsource.hublisting import ListingCache, list_repository
from llmkube.controllers.modelsource.localcopy import copy_local_model, verify_cached_file
from llmkube.controllers.modelsource.oserrors import describe, fetch_failure_for
from llmkube.controllers.modelsource.remoteheader import HeaderReadOptions, read_remote_gguf_metadata
from llmkube.kube.blocking import StopFlag, run_in_daemon_thread
from llmkube.plan.model import (
    ActionKind,
    CachedFile,
    FetchError,
    Fingerprint,
    HeaderFailure,
    ModelAction,
    ModelDecision,
    ModelFacts,
    ModelPlanConfig,
    ProbeFailure,
    ProbeOutcome,
    RemoteHeader,
    cache_layout,
    is_controller_cached,
    plan_model,
    status_changed,
)
from llmkube.plan.model.facts import CopyResult
from llmkube.plan.model.source import SourceKind
from llmkube.sources import PolicySource

#: The downloader's endpoint for s3:// without AWS_ENDPOINT_URL or AWS_REGION (download_scripts.py).
PUBLIC_S3_ENDPOINT = "https://s3.us-east-1.amazonaws.com"
#: Cloud Storage's XML API: public objects at /<bucket>/<object>, with ETags and Range
PUBLIC_GCS_ENDPOINT = "https://storage.googleapis.com"


def combined_probe(outcomes: Sequence[ProbeOutcome]) -> ProbeOutcome:
    """One fingerprint for every file of a Model: the first file's ETag and all their sizes
    together (a change of any is a change of the Model); the first failure, if one failed."""
    for outcome in outcomes:
        if outcome.failure is not None or outcome.fingerprint is None:
            return outcome
    if len(outcomes) == 1:
        return outcomes[0]
    lengths = [outcome.fingerprint.content_length for outcome in outcomes if outcome.fingerprint]
    total = sum(length for length in lengths if length is not None)
    first = outcomes[0].fingerprint
    return ProbeOutcome(
        fingerprint=Fingerprint(
            etag=first.etag if first else None,
            content_length=total if None not in lengths else None,
        )
    )


# A bound on the loop that the planner's contract already guarantees (probe → verify → copy);
# exceeding it is a planner bug, reported instead of spinning.
MAX_ACTIONS_PER_RECONCILE = 4

StatusWriter = Callable[[Model, ModelStatus], Awaitable[Model]]


class ActionPerformer(Protocol):
    async def perform(self, action: ModelAction, facts: ModelFacts) -> ModelFacts | None:
        """The facts with the action's result added, or None when the result comes later."""
        ...


class PlanLoopError(RuntimeError):
    pass


@dataclass(frozen=True)
class ModelSourceIO:
    """The I/O side of the Model controller. `session` is the controller's one aiohttp session;
    `stop` stops every copy and hash in flight (set when the controller shuts down: a copy is not
    worth holding up a shutdown or a hand-over for, the next leader starts it afresh);
    `copy_bytes_per_second` caps the disk bandwidth of each copy (None: no cap); `local_roots` are
    the only directories local sources are read from (--model-local-roots, normalized);
    `policy` gives the egress policy every http(s) request is checked against (the session's
    resolver must be a GuardedResolver of the same policy: egress.py)."""

    session: aiohttp.ClientSession
    probe_timeout: aiohttp.ClientTimeout = DEFAULT_PROBE_TIMEOUT
    header_options: HeaderReadOptions = field(default_factory=HeaderReadOptions)
    stop: StopFlag | None = None
    copy_bytes_per_second: float | None = None
    local_roots: tuple[str, ...] = ()
    policy: PolicySource = default_policy
    #: where a public gs:// object is read (Cloud Storage's; a stand-in in tests)
    gcs_endpoint: str = PUBLIC_GCS_ENDPOINT
    #: the Hub's file lists, kept a while (the controller's one cache, shared by its Models)
    listings: ListingCache = field(default_factory=ListingCache)

    async def observe_cached_file(self, model: Model, config: ModelPlanConfig) -> CachedFile | None:
        """What `<cache>/<cacheKey>/` holds for a controller-cached (local, non-metal) Model."""
        if not is_controller_cached(model):
            return None
        layout = cache_layout(model, config)
        return await run_in_daemon_thread(find_cached_file, layout.model_dir, layout.preferred_basename)

    async def perform(self, action: ModelAction, facts: ModelFacts) -> ModelFacts:
        """Do `action`; return the facts with its result added (what plan_model reads next)."""
        if action.kind is ActionKind.PROBE_FINGERPRINT:
            return await self._probe(action, facts)
        if action.kind is ActionKind.VERIFY:
            verified = await verify_cached_file(
                action.cached_path,
                action.model_name,
                action.expected_sha256,
                hash_contents=action.hash_file,
                stop=self.stop,
            )
            return replace(facts, verify=verified)
        if action.kind is ActionKind.REFETCH:
            try:
                await run_in_daemon_thread(remove_cached_files, action.model_dir)
            except OSError as error:
                message = f"failed to remove stale cached files in {action.model_dir}: {describe(error)}"
                return replace(facts, copy=FetchError(fetch_failure_for(error), message), cached_file=None)
            return replace(facts, copy=await self._copy(action), cached_file=None)
        if action.kind is ActionKind.COPY_LOCAL:
            return replace(facts, copy=await self._copy(action))
        if action.kind is ActionKind.READ_HEADER:
            return replace(facts, remote_header=await self._read_header(action))
        if action.kind is ActionKind.LIST_REPOSITORY:
            listing = await list_repository(self.session, action.source, self.policy, self.listings)
            return replace(facts, hub_listing=listing)
        return facts

    async def _read_header(self, action: ModelAction) -> RemoteHeader:
        return await read_remote_gguf_metadata(
            self.session, self._url(action.source, action), self.header_options, policy=self.policy
        )

    async def _copy(self, action: ModelAction) -> CopyResult:
        return await copy_local_model(
            action.source,
            action.model_dir,
            action.model_name,
            action.expected_sha256,
            roots=self.local_roots,
            bytes_per_second=self.copy_bytes_per_second,
            stop=self.stop,
        )

    async def _probe(self, action: ModelAction, facts: ModelFacts) -> ModelFacts:
        if action.source_kind is SourceKind.LOCAL:
            return replace(facts, probe=await probe_local_fingerprint(action.source, self.local_roots))
        if action.secret or action.identity:
            # The credentials are the downloader's (docs/security.md: the controller reads no
            # Secret, and has no pod's identity): nothing is sent, and status says what is
            # therefore not known.
            detail = (
                f"the pods' web identity (role {action.identity!r}) signs the requests"
                if action.identity
                else f"Secret {action.secret!r} holds the credentials, which the controller does not read"
            )
            unread = ProbeOutcome(failure=ProbeFailure.CREDENTIALS_UNREADABLE, detail=detail)
            header = RemoteHeader(failure=HeaderFailure.CREDENTIALS_UNREADABLE, detail=detail)
            return replace(facts, probe=unread, remote_header=header if action.read_header else None)
        locations = [self._url(location, action) for location in action.locations or (action.source,)]
        probes = asyncio.gather(
            *(
                probe_http_fingerprint(
                    self.session, url, client_timeout=self.probe_timeout, policy=self.policy
                )
                for url in locations
            )
        )
        if not action.read_header:
            return replace(facts, probe=combined_probe(await probes))
        outcomes, header = await asyncio.gather(probes, self._read_header(action))
        return replace(facts, probe=combined_probe(outcomes), remote_header=header)

    def _url(self, location: str, action: ModelAction) -> str:
        """An S3 location is a path-style path: without a Secret (a public bucket) the endpoint is
        the one the downloader uses without AWS_ENDPOINT_URL."""
        if action.remote_kind is SourceKind.S3:
            return f"{PUBLIC_S3_ENDPOINT}{location}"
        if action.remote_kind is SourceKind.GS:
            return f"{self.gcs_endpoint.rstrip('/')}{location}"
        return location


async def drive_model_plan(
    model: Model,
    facts: ModelFacts,
    config: ModelPlanConfig,
    io: ActionPerformer,
    write_status: StatusWriter,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> ModelDecision:
    """Plan, write status if it changed, perform the action, plan again — until nothing is left.

    `write_status(model, status)` persists the status (the controller's status update) and returns
    the Model as stored; it runs before an action, so a long copy shows `Copying` while it runs.
    Returns the final decision: its requeue, error and metric fields are for the caller; when it
    is `waiting`, an action runs in the background and its end brings the Model back.
    """
    for _ in range(MAX_ACTIONS_PER_RECONCILE + 1):
        decision = plan_model(model, facts, clock(), config)
        if status_changed(model.status, decision.status):
            model = await write_status(model, decision.status)
        if decision.waiting or decision.action.kind is ActionKind.NONE:
            return decision
        performed = await io.perform(decision.action, facts)
        if performed is None:
            return replace(decision, waiting=True)
        facts = performed
    raise PlanLoopError(
        f"model {model.metadata.name}: still acting after {MAX_ACTIONS_PER_RECONCILE} actions"
    )
