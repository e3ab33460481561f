"""Leader election on a ``coordination.k8s.io/v1`` Lease: the I/O loop around
:class:`~llmkube.kube.leader.state.ElectionState`.

Use::

    elector = LeaderElector(client, namespace="llmkube-system", name="882d6afe.llmkube.dev")
    client.write_guard = elector.leadership   # nothing is written without the lease
    await elector.acquire()        # returns once we are the leader
    lost = asyncio.create_task(elector.hold())   # raises LeadershipLost when the lease is lost
    ...
    await elector.release()        # on shutdown: write a released record so others take over now

Leadership ends (and :attr:`LeaderElector.leadership` stops granting writes) at the first of:

* ``renew_deadline`` after the start of the last successful renewal.  The whole renewal round is
  bounded, every attempt and every request in it, not only checked between attempts: one attempt
  can be three requests, and with 5 s each it used to carry a leader that could not reach the
  API server 12 s past its last renewal (client-go bounds its round the same way, counting from
  one retry period later);
* a renewal that finds another holder in the Lease: someone else holds it, we stop at once
  (client-go would keep retrying, and acting, until its deadline).
"""

from __future__ import annotations

import os
import random
import socket
import uuid

import structlog

from llmkube.kube import metrics
from llmkube.kube.clock import Clock, RealClock, run_within
from llmkube.kube.errors import ApiError, Conflict, NotFound
from llmkube.kube.leader.leadership import Leadership
from llmkube.kube.leader.state import JITTER_FACTOR, Action, ElectionState, LeaderElectionTiming, LeaseRecord
from llmkube.kube.resource import LEASES
from llmkube.kube.rest import ApiClient, RequestTimeout, TransportError
from llmkube.kube.types import Obj

__all__ = ["LeaderElector", "LeadershipLost", "default_identity"]

log = structlog.get_logger("llmkube.kube.leader.election")


class LeadershipLost(Exception):
    """The leader could not renew its lease within the renew deadline, or someone else holds it."""


def default_identity() -> str:
    """``<hostname>_<uuid>`` like controller-runtime: unique even for two processes on one host."""
    host = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{host}_{uuid.uuid4()}"


class LeaderElector:
    def __init__(
        self,
        client: ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str | None = None,
        timing: LeaderElectionTiming | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        # The Lease requests are what the write guard is about: never guarded themselves.
        self.client = client.without_write_guard()
        self.namespace = namespace
        self.name = name
        self.timing = timing or LeaderElectionTiming()
        self.state = ElectionState(identity or default_identity(), self.timing)
        self._clock = clock or RealClock()
        self._rng = rng or random.Random()
        self.leadership = Leadership(self._clock)
        self._lease: Obj | None = None  # the Lease as last read or written (carries its resourceVersion)
        self._renewed_at: float | None = None  # monotonic start of the last successful acquire/renew
        # A hung request gives up in time for the next attempt (the round itself is bounded too).
        self._request_timeout = RequestTimeout(total=max(1.0, self.timing.renew_deadline / 2), connect=2.0)
        self._gauge = metrics.LEADER_ELECTION_MASTER_STATUS.labels(name)
        self._gauge.set(0)
        self._log = log.bind(lease=f"{namespace}/{name}", identity=self.state.identity)

    @property
    def identity(self) -> str:
        return self.state.identity

    @property
    def is_leader(self) -> bool:
        return self.leadership.held and self.state.is_leader()

    # -- the loops ------------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Try every retry period (jittered) until we hold the lease."""
        self._log.info("attempting to acquire leader lease")
        while not await self.try_acquire_or_renew():
            period = self.timing.retry_period
            await self._clock.sleep(period + self._rng.random() * JITTER_FACTOR * period)
        self._gauge.set(1)
        self._log.info("acquired leader lease")

    async def hold(self) -> None:
        """Renew every retry period until the lease is lost, then raise :class:`LeadershipLost`
        (the right to write was revoked at that same moment)."""
        while True:
            await self._clock.sleep(self.timing.retry_period)
            assert self._renewed_at is not None, "acquire() before hold()"
            deadline = self._renewed_at + self.timing.renew_deadline
            try:
                await run_within(self._clock, deadline - self._clock.monotonic(), self._renew(deadline))
            except TimeoutError:
                self._lose("failed to renew the leader lease within the renew deadline")

    async def _renew(self, deadline: float) -> None:
        """Attempt every retry period until one succeeds (the caller bounds the whole round)."""
        while not await self.try_acquire_or_renew():
            if not self.state.is_leader():
                holder = self.state.observed.holder if self.state.observed else ""
                self._lose("another candidate holds the leader lease", holder=holder)
            await self._clock.sleep(
                min(self.timing.retry_period, max(0.0, deadline - self._clock.monotonic()))
            )

    def _lose(self, why: str, **details: str) -> None:
        self.leadership.revoke(lost=True)
        self._gauge.set(0)
        self._log.error(why, **details)
        raise LeadershipLost(f"lost lease {self.namespace}/{self.name}: {why}")

    async def release(self) -> bool:
        """Hand the lease back (only if we hold it); True when the released record was written."""
        self.leadership.revoke(lost=False)  # no more writes of ours from here on
        record = self.state.release(self._clock.now())
        self._gauge.set(0)
        if record is None or self._lease is None:
            return False
        try:
            try:
                await self._write(record)
            except Conflict:
                # A renewal we stopped waiting for (cancelled at shutdown) may have landed since:
                # release what is there, if it is still ours.
                current = await self.client.get(
                    LEASES, self.name, self.namespace, request_timeout=self._request_timeout
                )
                self._lease = current
                self.state.observe(LeaseRecord.from_lease(current), self._clock.monotonic())
                record = self.state.release(self._clock.now())
                if record is None:
                    return False
                await self._write(record)
        except (ApiError, TransportError) as error:
            self._log.warning("could not release the leader lease", error=repr(error))
            return False
        self._log.info("released leader lease")
        return True

    # -- one attempt ----------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; on success the right to write runs until ``renew_deadline`` after its start
        (the server stored our record after we sent it: nobody can take over before that plus
        ``lease_duration``)."""
        started = self._clock.monotonic()
        if await self._attempt(started):
            self._renewed_at = started
            self.leadership.grant(started + self.timing.renew_deadline)
            return True
        return False

    async def _attempt(self, now: float) -> bool:
        wall = self._clock.now()
        fast = self.state.fast_path(now, wall)
        if fast is not None and self._lease is not None:
            try:
                await self._write(fast)
                return True
            except (ApiError, TransportError) as error:
                self._log.info("optimistic lease renewal failed, re-reading", error=repr(error))
        try:
            current = await self.client.get(
                LEASES, self.name, self.namespace, request_timeout=self._request_timeout
            )
        except NotFound:
            current = None
        except (ApiError, TransportError) as error:
            self._log.warning("cannot read the leader lease", error=repr(error))
            return False
        self._lease = current
        step = self.state.decide(LeaseRecord.from_lease(current) if current else None, now, wall)
        if step.action is Action.WAIT:
            return False
        assert step.record is not None
        if step.slow_path:
            metrics.LEADER_ELECTION_SLOWPATH.labels(self.name).inc()
        try:
            if step.action is Action.CREATE:
                created = await self.client.create(
                    LEASES, self._lease_object(step.record), request_timeout=self._request_timeout
                )
                self._remember(created, step.record)
            else:
                await self._write(step.record)
        except (ApiError, TransportError) as error:
            # Conflict: someone else wrote first.  The next attempt reads their record.
            self._log.debug("lease write lost", error=repr(error))
            return False
        return True

    async def _write(self, record: LeaseRecord) -> None:
        assert self._lease is not None
        lease = dict(self._lease)
        lease["spec"] = record.to_spec()
        stored = await self.client.replace(LEASES, lease, request_timeout=self._request_timeout)
        self._remember(stored, record)

    def _remember(self, stored: Obj, record: LeaseRecord) -> None:
        self._lease = stored
        self.state.observe(record, self._clock.monotonic())

    def _lease_object(self, record: LeaseRecord) -> Obj:
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.to_spec(),
        }
