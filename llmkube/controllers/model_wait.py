"""Hold a service's first status while its Model has not been looked at yet.

When services and their Models are created together (or a controller starts on a cluster full of
them), the service's reconcile often runs before the Model controller has written the Model's first
status. Planning then says "Pending: waiting for the Model", and a moment later, once the Model is
Ready, "Creating": two status writes where the user only needs the second. So while a Model has no
status at all, the service's status waits, at most `HOLD_SECONDS` (a Model controller that never
gets to it must not hide the wait): the Model's first status write wakes the service anyway
(the Model watch), and the requeue is only the bound.
"""

from datetime import datetime

from llmkube.api.model import Model
from llmkube.kube.types import ObjectKey

#: How long a service waits for its Model's first status before it reports Pending.
HOLD_SECONDS = 15.0


class ModelWait:
    def __init__(self, hold_seconds: float = HOLD_SECONDS) -> None:
        self.hold_seconds = hold_seconds
        self._since: dict[ObjectKey, datetime] = {}

    def hold(self, key: ObjectKey, model: Model | None, now: datetime) -> float | None:
        """Seconds to wait before reconciling ``key`` again without planning, or None to plan now
        (the Model has a status, is missing, or was waited for long enough)."""
        if model is None or model.status is not None:
            self._since.pop(key, None)
            return None
        since = self._since.setdefault(key, now)
        left = self.hold_seconds - (now - since).total_seconds()
        return left if left > 0 else None

    def forget(self, key: ObjectKey) -> None:
        self._since.pop(key, None)
