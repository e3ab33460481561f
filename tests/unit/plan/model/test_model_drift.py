from datetime import UTC, datetime, timedelta

import pytest

from llmkube.plan.model import (
    DriftKind,
    Fingerprint,
    ProbeFailure,
    ProbeOutcome,
    decide_drift,
    next_revalidation_in,
    revalidation_due,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def probe(etag: str | None = None, length: int | None = None) -> ProbeOutcome:
    return ProbeOutcome(fingerprint=Fingerprint(etag=etag, content_length=length))


@pytest.mark.parametrize(
    ("last", "now", "due"),
    [
        (None, T0, True),  # never probed
        (T0, T0, False),
        (T0, T0 + HOUR - timedelta(seconds=1), False),
        (T0, T0 + HOUR, True),  # exactly one interval: due (a requeue fires at that instant)
        (T0, T0 + 3 * HOUR, True),
    ],
)
def test_revalidation_due(last: datetime | None, now: datetime, due: bool) -> None:
    assert revalidation_due(last, now, HOUR) is due


@pytest.mark.parametrize(
    ("last", "now", "wait"),
    [
        (None, T0, HOUR),
        (T0, T0, HOUR),
        (T0, T0 + timedelta(minutes=20), timedelta(minutes=40)),
        (T0, T0 + HOUR, HOUR),  # gate open (indeterminate probe left it behind): a full interval, not 0
        (T0, T0 + 5 * HOUR, HOUR),
    ],
)
def test_next_revalidation_in_is_positive_and_aligned(
    last: datetime | None, now: datetime, wait: timedelta
) -> None:
    assert next_revalidation_in(last, now, HOUR) == wait


@pytest.mark.parametrize(
    ("stored", "probed", "kind", "recorded"),
    [
        # indeterminate: failed probes and probes without any identifying header
        (("e1", 10), ProbeOutcome(failure=ProbeFailure.TIMEOUT), DriftKind.INDETERMINATE, ("e1", 10)),
        (("e1", 10), probe(), DriftKind.INDETERMINATE, ("e1", 10)),
        (("e1", 10), probe("", 0), DriftKind.INDETERMINATE, ("e1", 10)),
        # baseline: nothing stored yet, record whatever the probe saw
        ((None, None), probe("e1", 10), DriftKind.BASELINE, ("e1", 10)),
        (("", 0), probe(None, 10), DriftKind.BASELINE, (None, 10)),
        ((None, None), probe("e1", None), DriftKind.BASELINE, ("e1", None)),
        # ETag wins when both sides have one, even if the length moved
        (("e1", 10), probe("e1", 11), DriftKind.IN_SYNC, ("e1", 11)),
        (("e1", 10), probe("e2", 10), DriftKind.DRIFTED, ("e1", 10)),
        # otherwise the length decides
        ((None, 10), probe(None, 10), DriftKind.IN_SYNC, (None, 10)),
        ((None, 10), probe("e9", 10), DriftKind.IN_SYNC, ("e9", 10)),  # a new ETag fills the gap
        (("e1", 10), probe(None, 10), DriftKind.IN_SYNC, ("e1", 10)),
        ((None, 10), probe(None, 12), DriftKind.DRIFTED, (None, 10)),
        (("e1", None), probe(None, 12), DriftKind.DRIFTED, ("e1", None)),
    ],
)
def test_decide_drift(
    stored: tuple[str | None, int | None],
    probed: ProbeOutcome,
    kind: DriftKind,
    recorded: tuple[str | None, int | None],
) -> None:
    outcome = decide_drift(stored[0], stored[1], probed)
    assert outcome.kind is kind
    assert (outcome.etag, outcome.content_length) == recorded
    assert outcome.revalidated is (kind is not DriftKind.INDETERMINATE)
