"""The right to write, held while the leader lease is: a guard the API client asks before every
mutating request.

Stopping the workers when the lease is lost is not enough on its own: a reconcile in flight, an
Event write, a retry sleeping on a 429 would each still send their request.  So the elector grants
this token after every successful renewal, *with a deadline*, and revokes it the moment the lease
is lost or released; :class:`~llmkube.kube.rest.client.ApiClient` refuses a mutating request while it is
not held.  The deadline makes the guard safe on its own: an event loop stalled past it cannot write
even if the renew loop never got to run and notice.

The deadline is ``renew_deadline`` after the *start* of the last successful renewal.  Another
candidate takes over no earlier than ``lease_duration`` after it saw that renewal (which the server
stored after we sent it), so the two can never act at once, with ``lease_duration - renew_deadline``
(5 s by default) left for a request sent just before the deadline to land.  Like client-go, this is
no fencing: the API server does not check the token.
"""

from __future__ import annotations

import math

from llmkube.kube.clock import Clock

__all__ = ["Leadership", "NotLeader"]


class NotLeader(Exception):
    """A write refused because this process does not hold the leader lease (any more)."""


class Leadership:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._until = -math.inf  # monotonic deadline of the right to write
        self.lost = False  # revoked because the lease was lost (not released, not yet acquired)

    @property
    def held(self) -> bool:
        return self._clock.monotonic() < self._until

    def grant(self, until: float) -> None:
        """Hold the right to write until ``until`` (monotonic seconds); never after a loss."""
        if not self.lost:
            self._until = until

    def revoke(self, *, lost: bool) -> None:
        """Stop writing now: the lease was lost (``lost``), or is being released."""
        self._until = -math.inf
        self.lost = self.lost or lost

    def check_write(self, method: str, path: str) -> None:
        if not self.held:
            raise NotLeader(f"{method} {path} refused: this process does not hold the leader lease")
