"""plan_model against hostile http(s) sources: a header the file makes
unusable fails the Model and the failure stands until the spec or the file changes; a refused
source fails as SourceNotAllowed; every message is bounded; an action in flight is waited for and
results for another spec are ignored."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmkube.api.model import GGUFMetadata, Model, ModelStatus
from llmkube.plan.model import (
    ActionKind,
    ActionTarget,
    Fingerprint,
    HeaderFailure,
    ModelAction,
    ModelDecision,
    ModelFacts,
    ModelPlanConfig,
    ProbeFailure,
    ProbeOutcome,
    RemoteHeader,
    Requeue,
    plan_model,
    status_after_refusal,
    status_changed,
)
from llmkube.plan.model.bounds import MAX_MESSAGE, TRUNCATION_MARKER
from llmkube.plan.model.decision import FETCH_FAILURE_REQUEUE
from llmkube.plan.model.source import SourceKind, cache_key

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
SRC = "https://models.example.com/llama.gguf"
PROBE = ProbeOutcome(fingerprint=Fingerprint(etag='"e1"', content_length=4096))
OTHER_FILE = ProbeOutcome(fingerprint=Fingerprint(etag='"e2"', content_length=8192))
META = GGUFMetadata(architecture="llama", model_name="Tiny Llama")
SUMMARY = {"Ready", "Reconciling", "Stalled"}


def make_model(
    source: str = SRC, *, status: ModelStatus | None = None, generation: int = 3, **spec: Any
) -> Model:
    model = Model.model_validate(
        {
            "metadata": {"name": "m", "namespace": "ml", "generation": generation},
            "spec": {"source": source, **spec},
        }
    )
    return model.model_copy(update={"status": status})


def plan(model: Model, facts: ModelFacts | None = None, now: datetime = T0) -> ModelDecision:
    return plan_model(model, facts or ModelFacts(), now, ModelPlanConfig())


def degraded(decision: ModelDecision) -> tuple[str, str, str]:
    found = {c.type: (c.status, c.reason, c.message) for c in decision.status.conditions or ()}
    return found["Degraded"]


@pytest.mark.parametrize(
    ("failure", "reason", "says"),
    [
        (HeaderFailure.NOT_GGUF, "InvalidModelFile", "is not a GGUF file the controller can read: bad magic"),
        (HeaderFailure.HEADER_TOO_LARGE, "InvalidModelFile", "is not a GGUF file the controller can read"),
        (
            HeaderFailure.INVALID_RESPONSE,
            "InvalidSourceResponse",
            "answered a Range request no file can answer",
        ),
    ],
)
def test_a_header_the_file_makes_unusable_fails_with_the_file_s_fingerprint(
    failure: HeaderFailure, reason: str, says: str
) -> None:
    header = RemoteHeader(failure=failure, detail="bad magic")
    decision = plan(make_model(), ModelFacts(probe=PROBE, remote_header=header))
    status = decision.status
    assert status.phase == "Failed"
    state, why, message = degraded(decision)
    assert (state, why) == ("True", reason)
    assert says in message and message.endswith(
        "it is not read again until the spec or the file (its ETag or size) changes"
    )
    assert (status.source_e_tag, status.source_content_length, status.last_revalidated) == ('"e1"', 4096, T0)
    assert (status.cache_key, status.gguf) == (cache_key(SRC), None)
    assert decision.requeue == Requeue(after=HOUR)  # looked at again when a revalidation is due
    assert decision.error is None  # no backoff: the same bytes would fail the same way


@pytest.mark.parametrize(
    "failure",
    [
        HeaderFailure.TIMEOUT,
        HeaderFailure.CONNECTION,
        HeaderFailure.RANGES_UNSUPPORTED,
        HeaderFailure.HTTP_STATUS,
    ],
)
def test_a_header_that_could_not_be_fetched_only_leaves_the_metadata_out(failure: HeaderFailure) -> None:
    decision = plan(make_model(), ModelFacts(probe=PROBE, remote_header=RemoteHeader(failure=failure)))
    assert (decision.status.phase, decision.status.gguf) == ("Ready", None)


def failed_on_file() -> ModelStatus:
    header = RemoteHeader(failure=HeaderFailure.NOT_GGUF, detail="not a GGUF file (magic b'PK')")
    return plan(make_model(), ModelFacts(probe=PROBE, remote_header=header)).status


def test_the_failure_stands_without_any_fetch_until_a_revalidation() -> None:
    """What a restarted controller (or any reconcile) plans from the stored status: nothing to do."""
    failed = failed_on_file()
    decision = plan(make_model(status=failed), now=T0 + timedelta(minutes=20))
    assert decision.action.kind is ActionKind.NONE
    assert not status_changed(failed, decision.status)
    assert decision.requeue == Requeue(after=timedelta(minutes=40))


def test_a_revalidation_asks_only_for_the_fingerprint() -> None:
    decision = plan(make_model(status=failed_on_file()), now=T0 + 2 * HOUR)
    assert decision.action.kind is ActionKind.PROBE_FINGERPRINT
    assert decision.action.read_header is False


@pytest.mark.parametrize(
    "probe",
    [PROBE, ProbeOutcome(failure=ProbeFailure.TIMEOUT, detail="HEAD: no answer")],
    ids=["same-file", "indeterminate"],
)
def test_the_same_file_keeps_its_failure(probe: ProbeOutcome) -> None:
    failed = failed_on_file()
    later = T0 + 2 * HOUR
    decision = plan(make_model(status=failed), ModelFacts(probe=probe), now=later)
    assert decision.action.kind is ActionKind.NONE
    assert decision.status.phase == "Failed"
    assert degraded(decision)[1] == "InvalidModelFile"
    revalidated = later if probe.fingerprint else T0
    assert decision.status.last_revalidated == revalidated


def test_another_file_is_read_afresh() -> None:
    failed = failed_on_file()
    later = T0 + 2 * HOUR
    model = make_model(status=failed)
    decision = plan(model, ModelFacts(probe=OTHER_FILE), now=later)
    assert decision.action.kind is ActionKind.READ_HEADER
    assert decision.action.target == ActionTarget(SRC)
    good = plan(model, ModelFacts(probe=OTHER_FILE, remote_header=RemoteHeader(metadata=META)), now=later)
    assert (good.status.phase, good.status.gguf) == ("Ready", META)
    # a new baseline, not drift against the file that failed
    assert (good.status.source_e_tag, good.status.source_content_length) == ('"e2"', 8192)
    conditions = {c.type: (c.status, c.reason) for c in good.status.conditions or ()}
    assert conditions["SourceDrifted"] == ("False", "InSync")
    assert conditions["Degraded"] == ("False", "Superseded")


def test_a_spec_edit_reads_the_header_again() -> None:
    model = make_model(status=failed_on_file(), generation=4)
    later = T0 + timedelta(minutes=5)  # the fingerprint is fresh: only the header is read
    assert plan(model, now=later).action.kind is ActionKind.READ_HEADER
    decision = plan(model, ModelFacts(remote_header=RemoteHeader(metadata=META)), now=later)
    assert (decision.status.phase, decision.status.gguf) == ("Ready", META)


def test_a_new_source_starts_afresh() -> None:
    decision = plan(make_model("https://models.example.com/other.gguf", status=failed_on_file()))
    assert decision.action.kind is ActionKind.PROBE_FINGERPRINT and decision.action.read_header is True


@pytest.mark.parametrize(
    "facts",
    [
        ModelFacts(
            probe=ProbeOutcome(failure=ProbeFailure.NOT_ALLOWED, detail="127.0.0.1 is a loopback address")
        ),
        ModelFacts(
            probe=PROBE,
            remote_header=RemoteHeader(
                failure=HeaderFailure.NOT_ALLOWED, detail="127.0.0.1 is a loopback address"
            ),
        ),
    ],
    ids=["probe", "header-redirect"],
)
def test_a_refused_source_fails_as_source_not_allowed(facts: ModelFacts) -> None:
    decision = plan(make_model(), facts)
    state, reason, message = degraded(decision)
    assert (decision.status.phase, state, reason) == ("Failed", "True", "SourceNotAllowed")
    assert message.startswith(f'The controller does not fetch "{SRC}": 127.0.0.1 is a loopback address.')
    assert "--model-source-allowed-hosts" in message
    assert decision.requeue == Requeue(after=FETCH_FAILURE_REQUEUE)
    # nothing the refused host could have said is in status
    assert decision.status.gguf is None
    again = plan(make_model(status=decision.status), now=T0 + FETCH_FAILURE_REQUEUE)
    assert again.action.kind is ActionKind.PROBE_FINGERPRINT  # a name may resolve elsewhere later


def test_messages_are_bounded_and_marked() -> None:
    detail = "x" * (5 * 1024 * 1024)  # a server's 5 MiB reason phrase
    header = RemoteHeader(failure=HeaderFailure.NOT_GGUF, detail=detail)
    decision = plan(make_model(), ModelFacts(probe=PROBE, remote_header=header))
    for condition in decision.status.conditions or ():
        assert len(condition.message) <= MAX_MESSAGE + 40
    assert TRUNCATION_MARKER in degraded(decision)[2]


def test_other_formats_have_no_gguf_header_to_read() -> None:
    decision = plan(make_model(format="safetensors"))
    assert decision.action.kind is ActionKind.PROBE_FINGERPRINT and decision.action.read_header is False


def test_an_action_in_flight_is_waited_for() -> None:
    pending = ModelAction(
        kind=ActionKind.PROBE_FINGERPRINT, source_kind=SourceKind.HTTP, source=SRC, target=ActionTarget(SRC)
    )
    decision = plan(make_model(), ModelFacts(pending=pending))
    assert decision.waiting and decision.action.kind is ActionKind.NONE
    assert decision.status is not None and not status_changed(None, decision.status)
    # ... unless it is about another spec: then the Model is planned as if nothing ran
    stale = ModelAction(
        kind=ActionKind.PROBE_FINGERPRINT, source=SRC, target=ActionTarget("https://old/x.gguf")
    )
    fresh = plan(make_model(), ModelFacts(pending=stale))
    assert not fresh.waiting and fresh.action.kind is ActionKind.PROBE_FINGERPRINT


def test_results_for_another_spec_are_ignored() -> None:
    header = RemoteHeader(failure=HeaderFailure.NOT_GGUF, detail="not GGUF")
    old = ModelFacts(probe=PROBE, remote_header=header, results_for=ActionTarget("https://old/x.gguf"))
    assert plan(make_model(), old).action.kind is ActionKind.PROBE_FINGERPRINT
    current = ModelFacts(probe=PROBE, remote_header=header, results_for=ActionTarget(SRC))
    assert plan(make_model(), current).status.phase == "Failed"


def test_a_refused_status_is_replaced_by_one_that_says_so() -> None:
    """The status planned from a hostile source, refused by the API server: the one written instead
    holds nothing but bounded fields, says why, and stands like a refused header."""
    planned = plan(make_model(), ModelFacts(probe=PROBE, remote_header=RemoteHeader(metadata=META))).status
    fallback = status_after_refusal(
        planned,
        None,
        code=413,
        reason="RequestEntityTooLarge",
        detail="limit is 3145728",
        now=T0,
        generation=3,
    )
    assert (fallback.phase, fallback.gguf, fallback.path) == ("Failed", None, None)
    assert (fallback.cache_key, fallback.source_e_tag, fallback.last_revalidated) == (
        cache_key(SRC),
        '"e1"',
        T0,
    )
    conditions = {c.type: (c.status, c.reason, c.message) for c in fallback.conditions or ()}
    assert conditions["Degraded"][:2] == ("True", "StatusRejected")
    assert conditions["Degraded"][2].startswith(
        "The API server refused the status planned for this Model "
        "(413 RequestEntityTooLarge: limit is 3145728)"
    )
    assert conditions["Stalled"][:2] == ("True", "StatusRejected")
    ModelStatus.model_validate(fallback.model_dump())
    # what the next reconcile (or a restarted controller) makes of it: nothing, until revalidation
    model = make_model(status=fallback)
    assert plan(model, now=T0 + timedelta(minutes=5)).action.kind is ActionKind.NONE
    assert plan(model, now=T0 + 2 * HOUR).action.read_header is False
