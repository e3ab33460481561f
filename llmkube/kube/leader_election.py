"""Leader election on a ``coordination.k8s.io/v1`` Lease: the I/O loop around
:class:`~llmkube.kube.leader_state.ElectionState`.

Use::

    elector = LeaderElector(client, namespace="llmkube-system", name="882d6afe.llmkube.dev")
    await elector.acquire()        # returns once we are the leader
    lost = asyncio.create_task(elector.hold())   # returns if we fail to renew within the deadline
    ...
    await elector.release()        # on shutdown: write a released record so others take over now
"""

from __future__ import annotations

import os
import random
import socket
import uuid

import structlog

from llmkube.kube import metrics
from llmkube.kube.client import ApiClient
from llmkube.kube.clock import Clock, RealClock
from llmkube.kube.errors import ApiError, NotFound
from llmkube.kube.leader_state import JITTER_FACTOR, Action, ElectionState, LeaderElectionTiming, LeaseRecord
from llmkube.kube.resource import LEASES
from llmkube.kube.transport import RequestTimeout, TransportError
from llmkube.kube.types import Obj

__all__ = ["LeaderElector", "LeadershipLost", "default_identity"]

log = structlog.get_logger("llmkube.kube.leader_election")


class LeadershipLost(Exception):
    """The leader could not renew its lease within the renew deadline."""


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
        self.client = client
        self.namespace = namespace
        self.name = name
        self.timing = timing or LeaderElectionTiming()
        self.state = ElectionState(identity or default_identity(), self.timing)
        self._clock = clock or RealClock()
        self._rng = rng or random.Random()
        self._lease: Obj | None = None  # the Lease as last read or written (carries its resourceVersion)
        # Each request must end well within the renew deadline, or a hung PATCH overruns it.
        self._request_timeout = RequestTimeout(total=max(1.0, self.timing.renew_deadline / 2), connect=2.0)
        self._gauge = metrics.LEADER_ELECTION_MASTER_STATUS.labels(name)
        self._gauge.set(0)
        self._log = log.bind(lease=f"{namespace}/{name}", identity=self.state.identity)

    @property
    def identity(self) -> str:
        return self.state.identity

    @property
    def is_leader(self) -> bool:
        return self.state.is_leader() and self.state.lease_valid(self._clock.monotonic())

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
        """Renew every retry period; return (raise :class:`LeadershipLost`) when a renewal round has
        not succeeded within the renew deadline."""
        while True:
            await self._clock.sleep(self.timing.retry_period)
            round_started = self._clock.monotonic()
            while not await self.try_acquire_or_renew():
                if self._clock.monotonic() - round_started >= self.timing.renew_deadline:
                    self._gauge.set(0)
                    self._log.error("failed to renew the leader lease within the renew deadline")
                    raise LeadershipLost(f"lost lease {self.namespace}/{self.name}")
                await self._clock.sleep(self.timing.retry_period)

    async def release(self) -> bool:
        """Hand the lease back (only if we hold it); True when the released record was written."""
        record = self.state.release(self._clock.now())
        self._gauge.set(0)
        if record is None or self._lease is None:
            return False
        try:
            await self._write(record)
        except (ApiError, TransportError) as error:
            self._log.warning("could not release the leader lease", error=repr(error))
            return False
        self._log.info("released leader lease")
        return True

    # -- one attempt ----------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        now, wall = self._clock.monotonic(), self._clock.now()
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
