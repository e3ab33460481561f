"""When is a Model status worth writing? Only when something besides `lastUpdated` changed
(the reference operator wrote one on every reconcile): an unchanged reconcile makes no write and
so triggers no watch event.
"""

from typing import Any

from llmkube.api.model import ModelStatus

_TIMESTAMP_ONLY = frozenset({"last_updated"})


def _comparable(status: ModelStatus | None) -> dict[str, Any]:
    # exclude_none: a field that is None and a field never set serialize the same way on the wire.
    return (status or ModelStatus()).model_dump(mode="json", exclude=set(_TIMESTAMP_ONLY), exclude_none=True)


def status_changed(old: ModelStatus | None, new: ModelStatus) -> bool:
    return _comparable(old) != _comparable(new)
