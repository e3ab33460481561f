"""The leader's ledger: what it admitted, who waits on which quota, and whom a change wakes."""

from llmkube.plan.quota.decision import ReplicaCost
from llmkube.plan.quota.ledger import Claim, QuotaLedger

Q = "team-a/team-a"


def claim(
    granted: int, order: int, waiting: str = "", gpus: int = 1, quotas: frozenset[str] = frozenset({Q})
) -> Claim:
    return Claim(
        quotas, ReplicaCost(gpus, None), granted, (-10_000, False, float(order), "ns", str(order)), waiting
    )


def test_waiters_in_queue_order_and_who_is_ahead() -> None:
    ledger = QuotaLedger()
    ledger.record(("ns", "late"), claim(0, 30, Q))
    ledger.record(("ns", "early"), claim(0, 10, Q))
    ledger.record(("ns", "holder"), claim(2, 5))
    assert ledger.waiters(Q) == [("ns", "early"), ("ns", "late")]
    assert ledger.ahead(Q, claim(0, 20).order, ("ns", "me")) == "ns/early"
    assert ledger.ahead(Q, claim(0, 10).order, ("ns", "early")) == ""  # itself is not ahead
    assert ledger.ahead("other/q", claim(0, 99).order, ("ns", "me")) == ""


def test_a_release_wakes_the_quota() -> None:
    ledger = QuotaLedger()
    assert ledger.record(("ns", "a"), claim(3, 1)) == set()  # first record: nothing released
    assert ledger.record(("ns", "a"), claim(3, 1)) == set()  # the same: nothing
    assert ledger.record(("ns", "a"), claim(4, 1)) == set()  # holds more: nobody can get in
    assert ledger.record(("ns", "a"), claim(1, 1)) == {Q}  # holds less
    assert ledger.record(("ns", "a"), claim(1, 1, gpus=0)) == {Q}  # smaller replicas


def test_leaving_the_line_wakes_the_next() -> None:
    ledger = QuotaLedger()
    ledger.record(("ns", "a"), claim(0, 1, Q))
    assert ledger.record(("ns", "a"), claim(1, 1)) == {Q}


def test_forget_releases_and_leaves_the_line() -> None:
    ledger = QuotaLedger()
    ledger.record(("ns", "a"), claim(2, 1, "other/q"))
    assert ledger.forget(("ns", "a")) == {Q, "other/q"}
    assert ledger.forget(("ns", "a")) == set()
    assert len(ledger) == 0


def test_no_longer_covered_wakes_the_old_quota() -> None:
    ledger = QuotaLedger()
    ledger.record(("ns", "a"), claim(2, 1))
    assert ledger.record(("ns", "a"), claim(2, 1, quotas=frozenset({"x/y"}))) == {Q}
