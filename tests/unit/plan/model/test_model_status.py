from datetime import UTC, datetime

import pytest

from llmkube.api.model import ModelStatus
from llmkube.plan.model import status_changed

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 2, tzinfo=UTC)

READY = ModelStatus(phase="Ready", size="1.0 KiB", path="/models/k/m.gguf", last_updated=T0)


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (READY, READY.model_copy(update={"last_updated": T1}), False),  # only the timestamp moved
        (READY, READY.model_copy(update={"last_updated": None}), False),
        (READY, READY.model_copy(update={"size": "2.0 KiB"}), True),
        (READY, READY.model_copy(update={"last_revalidated": T1}), True),  # a revalidation is news
        (None, ModelStatus(), False),  # no status and an empty status look the same on the wire
        (None, ModelStatus(phase="Pending"), True),
        (ModelStatus(path=None), ModelStatus(), False),  # None and unset are the same
        # An empty path is no path: a status an older version wrote with "" costs no write.
        (ModelStatus(path=""), ModelStatus(), False),
        (ModelStatus(path=""), ModelStatus(path="/models/k/m.gguf"), True),
        (ModelStatus(cache_key=""), ModelStatus(), True),  # other fields: "" is a value
    ],
)
def test_status_changed_ignores_last_updated(
    old: ModelStatus | None, new: ModelStatus, changed: bool
) -> None:
    assert status_changed(old, new) is changed
