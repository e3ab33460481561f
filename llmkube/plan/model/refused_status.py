"""The status a Model gets when the one planned for it cannot be written (pure).

Every value a source puts into status is bounded (bounds.py), so a planned status is a few KiB.
Should one still be refused (a bound missed, a stricter API server), the Model must not be left
without any status: five hostile Models were once left with none at all, each retried for
ever. So the controller writes a small status instead, built only from fields that
cannot be the cause: phase Failed, Degraded `StatusRejected` saying what the API server answered,
the source's cache key and fingerprint (bounded), so the planner holds the failure until the spec
or the file changes (plan/model/sources/downloaded.py) rather than fetching again.

Refusals are told by their code: 400 (a body the server cannot decode), 413 (larger than the
server's limit, 3 MiB) and 422 (invalid: a number beyond an int64). etcd's own limit (about
1.5 MiB) comes back as a 500 that nothing but its message tells from any other internal error, so
the controller never sends a status larger than MAX_STATUS_BYTES in the first place.
"""

from datetime import datetime

from llmkube.api.model import ModelStatus
from llmkube.plan.conditions.summary import summarize
from llmkube.plan.model import conditions as cond
from llmkube.plan.model.bounds import INT64_MAX, bounded_etag, bounded_message, in_range, truncated

#: What the controller sends at most as a Model's status (planned ones are a few KiB).
MAX_STATUS_BYTES = 256 * 1024
#: The API server's answers to a status it will not store, whatever is retried.
REFUSED_STATUS_CODES = frozenset({400, 413, 422})
_DETAIL_CHARACTERS = 512


def is_refused_status(code: int) -> bool:
    return code in REFUSED_STATUS_CODES


def status_after_refusal(
    planned: ModelStatus,
    stored: ModelStatus | None,
    *,
    code: int,
    reason: str,
    detail: str,
    now: datetime,
    generation: int | None,
) -> ModelStatus:
    """The status to write instead of `planned`, which was refused (`code`, `reason`, the server's
    `detail`) or not sent (too large: code 413, as the API server would have answered). Its
    conditions build on the `stored` ones, which the server accepted."""
    message = bounded_message(cond.msg_status_rejected(code, reason, truncated(detail, _DETAIL_CHARACTERS)))
    conditions = cond.mark_failed(
        (stored or ModelStatus()).conditions,
        reason=cond.STATUS_REJECTED,
        message=message,
        now=now,
        generation=generation,
    )
    conditions = summarize(
        conditions, cond.model_summary("Failed", conditions), generation=generation, now=now
    )
    return ModelStatus(
        phase="Failed",
        cache_key=truncated(planned.cache_key, 64) if planned.cache_key else planned.cache_key,
        source_e_tag=bounded_etag(planned.source_e_tag),
        source_content_length=in_range(planned.source_content_length, high=INT64_MAX),
        last_revalidated=planned.last_revalidated,
        accelerator_ready=planned.accelerator_ready,
        last_updated=now,
        conditions=conditions,
    )
