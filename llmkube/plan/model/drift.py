"""Drift detection: has the upstream source changed since the cache was filled? And what a
status says of it: the fingerprint it keeps, `SourceDrifted`, when it was last revalidated."""

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from llmkube.api.model import ModelStatus
from llmkube.plan.conditions.standard import remove_condition
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.facts import ProbeOutcome
from llmkube.plan.model.inputs import PlanInputs


class DriftKind(enum.Enum):
    INDETERMINATE = (
        "Indeterminate"  # the probe told us nothing: change nothing, do not advance lastRevalidated
    )
    BASELINE = "Baseline"  # first fingerprint recorded; never counts as drift (an upgrade must not re-pull)
    IN_SYNC = "InSync"
    DRIFTED = "Drifted"


@dataclass(frozen=True)
class DriftOutcome:
    kind: DriftKind
    # The fingerprint to store in status afterwards.
    etag: str | None
    content_length: int | None

    @property
    def revalidated(self) -> bool:
        """Whether this counts as a completed revalidation (advances lastRevalidated)."""
        return self.kind is not DriftKind.INDETERMINATE


def revalidation_due(last_revalidated: datetime | None, now: datetime, interval: timedelta) -> bool:
    """The cadence gate: probe when never probed, or when a full interval has passed."""
    return last_revalidated is None or now - last_revalidated >= interval


def next_revalidation_in(last_revalidated: datetime | None, now: datetime, interval: timedelta) -> timedelta:
    """RequeueAfter for a Ready model: the time left until the gate opens, or a full interval when the
    gate is already open (an indeterminate probe left lastRevalidated behind) — never zero, never a spin.
    """
    if last_revalidated is None:
        return interval
    remaining = last_revalidated + interval - now
    return remaining if remaining > timedelta(0) else interval


def decide_drift(stored_etag: str | None, stored_length: int | None, probe: ProbeOutcome) -> DriftOutcome:
    """Compare the stored fingerprint with a probe: ETag when both sides have one, else the length."""
    fingerprint = probe.fingerprint
    if fingerprint is None or not fingerprint.determinate:
        return DriftOutcome(DriftKind.INDETERMINATE, stored_etag, stored_length)
    probed_etag = fingerprint.etag or None
    probed_length = fingerprint.content_length or None
    if not stored_etag and not stored_length:
        return DriftOutcome(DriftKind.BASELINE, probed_etag, probed_length)
    if stored_etag and probed_etag:
        in_sync = stored_etag == probed_etag
    else:
        in_sync = (stored_length or None) == probed_length
    if in_sync:
        # Refresh with what the probe saw: fills a field the baseline lacked (e.g. a new ETag).
        return DriftOutcome(DriftKind.IN_SYNC, probed_etag or stored_etag, probed_length or stored_length)
    # Keep the old fingerprint: drift stays reported until the cache is re-filled.
    return DriftOutcome(DriftKind.DRIFTED, stored_etag, stored_length)


def with_drift(status: ModelStatus, probe: ProbeOutcome, inputs: PlanInputs) -> tuple[ModelStatus, DriftKind]:
    """The status with a probe's verdict recorded (unless it told nothing), and the verdict."""
    outcome = decide_drift(status.source_e_tag, status.source_content_length, probe)
    if not outcome.revalidated:
        return status, outcome.kind
    conditions = cond.mark_source_drifted(
        status.conditions,
        drifted=outcome.kind is DriftKind.DRIFTED,
        source=inputs.source,
        now=inputs.now,
        generation=inputs.generation,
    )
    updated = status.model_copy(
        update={
            "source_e_tag": outcome.etag,
            "source_content_length": outcome.content_length,
            "last_revalidated": inputs.now,
            "conditions": conditions,
        }
    )
    return updated, outcome.kind


def without_drift(status: ModelStatus) -> ModelStatus:
    """PVC, HuggingFace and metal-local sources cannot be probed: they carry no drift state."""
    return status.model_copy(
        update={
            "source_e_tag": None,
            "source_content_length": None,
            "last_revalidated": None,
            "conditions": remove_condition(status.conditions, cond.SOURCE_DRIFTED),
        }
    )
