"""What the host agent does about one service (plan_service): a table from what it observed to
what it does, what it says and what it keeps, for every branch of the walk in service.py."""

from dataclasses import replace
from typing import Any

import pytest

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.agent.admission import Resident
from llmkube.plan.agent.artifact import FetchFailed, Fetching, ModelFile
from llmkube.plan.agent.assignment import Assignment, Verdict
from llmkube.plan.agent.launch import KEY_RETRY, Host, KeyFile, KeyMissing, Launch
from llmkube.plan.agent.service import (
    REPLACED,
    Announce,
    Evict,
    Memory,
    Promote,
    Rank,
    Rebind,
    Remembered,
    Server,
    ServiceFacts,
    ServicePlan,
    Serving,
    SetAside,
    Start,
    Stop,
    plan_service,
)
from llmkube.plan.inferenceservice.memory_fit import GIB

MAC = Host(address="192.168.1.20", metal=True)
NORMAL, LOW = 10_000, 100
ISVC = InferenceService.model_validate(
    {"metadata": {"name": "chat", "namespace": "ai", "uid": "u1"}, "spec": {"modelRef": "m"}}
)
MODEL = Model.model_validate(
    {"metadata": {"name": "m", "namespace": "ai"}, "spec": {"source": "https://host/m.gguf"}}
)
FILE = ModelFile("/cache/m.gguf", "dev:1:ino:2", 2 * GIB)
KEY = KeyFile("/state/keys/ai.chat.key", "fp1")
WANTED = Launch("llama-server", ISVC, MODEL, MAC, FILE, KEY).identity()
OLD = "an-older-spec"


def server(identity: str = WANTED, gib: float = 2, **kw: Any) -> Server:
    return Server(identity=identity, need=int(gib * GIB), started_at=1.0, **kw)


def facts(
    *,
    verdict: Verdict = Verdict.SERVE,
    gib: float = 2,
    budget: float = 8,
    others: tuple[Resident, ...] = (),
    serving: Serving | None = None,
    **kw: Any,
) -> ServiceFacts:
    held = sum(o.bytes for o in others) + sum(
        s.need for s in (kw.get("current"), kw.get("next")) if s is not None
    )
    base = ServiceFacts(
        key="ai/chat",
        agent="mac-1",
        binary="llama-server",
        host=MAC,
        isvc=ISVC,
        model=MODEL,
        assignment=Assignment(verdict, "cannot" if verdict is Verdict.UNSUPPORTED else "", NORMAL),
        memory=Memory(int(budget * GIB), others, held + kw.pop("held_extra", 0)),
        now=100.0,
        remembered=Remembered("u1"),
        serving=serving or Serving(FILE, int(gib * GIB), KEY),
    )
    return replace(base, **kw)


def low(gib: float, key: str = "ai/low") -> Resident:
    return Resident(key, int(gib * GIB), LOW, False, 0.0)


def steps(plan: ServicePlan) -> list[str]:
    """The plan's actions, one line each."""
    lines = []
    for action in plan.actions:
        match action:
            case Stop(role=role, reason=reason):
                lines.append(f"stop {role}: {reason}")
            case SetAside(role=role):
                lines.append(f"set aside {role}")
            case Start(role=role, launch=launch):
                assert launch.identity() == WANTED
                lines.append(f"start {role}")
            case Promote():
                lines.append("promote")
            case Rank(priority=priority):
                lines.append(f"rank {priority}")
            case Rebind(launch=launch):
                lines.append("rebind")
            case Evict(key=key):
                lines.append(f"evict {key}")
            case Announce(reason=reason):
                lines.append(f"announce {reason}")
    return lines


EVICTED_BEFORE = Remembered("u1", evicted="evicted by the host agent mac-1 to make room for ai/big")
UNDER_PRESSURE = Remembered("u1", evicted="evicted under memory pressure", evicted_under_pressure=True)

CASES: list[tuple[str, ServiceFacts, list[str], str | None]] = [
    # (what, facts, actions, the slice's reason while no server serves)
    (
        "gone",
        facts(verdict=Verdict.REMOVE, current=server()),
        ["stop current: the service is gone, or not this agent's"],
        None,
    ),
    (
        "replicas 0",
        facts(verdict=Verdict.STOP, current=server(), next=server(OLD)),
        ["stop current: spec.replicas is 0", "stop next: spec.replicas is 0"],
        None,
    ),
    (
        "unsupported",
        facts(verdict=Verdict.UNSUPPORTED, current=server()),
        ["stop current: this agent cannot serve it"],
        "UnsupportedByAgent",
    ),
    ("keep", facts(verdict=Verdict.KEEP, current=server()), [], None),
    ("fetching", facts(serving=Serving(Fetching("12 of 40 MiB"))), [], "FetchingModel"),
    (
        "fetch failed",
        facts(serving=Serving(FetchFailed("ModelFetchFailed", "404", 130.0))),
        [],
        "ModelFetchFailed",
    ),
    ("need unknown", facts(serving=Serving(FILE)), [], "InsufficientMemory"),
    ("key missing", facts(serving=Serving(FILE, GIB, KeyMissing("no master key"))), [], "StartingServer"),
    ("start", facts(), ["start current"], None),
    (
        "start, evicting a lower priority",
        facts(gib=4, others=(low(6),)),
        ["evict ai/low", "start current"],
        None,
    ),
    ("does not fit", facts(gib=9), [], "InsufficientMemory"),
    (
        "evicted, does not fit yet",
        facts(
            gib=4, budget=4, others=(Resident("ai/big", 2 * GIB, 10**6, False, 0),), remembered=EVICTED_BEFORE
        ),
        [],
        "Evicted",
    ),
    (
        "evicted under pressure, pressure on",
        facts(remembered=UNDER_PRESSURE, memory=Memory(8 * GIB, (), 0, pressure=True)),
        [],
        "Evicted",
    ),
    ("evicted under pressure, pressure over", facts(remembered=UNDER_PRESSURE), ["start current"], None),
    (
        "its old server still drains, no room",
        facts(gib=5, draining=True, held_extra=5 * GIB),
        [],
        "StartingServer",
    ),
    (
        "its server stopping",
        facts(current=server(stopping=True)),
        ["set aside current", "start current"],
        None,
    ),
    ("serves this spec", facts(current=server(serving=True)), ["rank 10000", "rebind"], None),
    (
        "the spec changed back",
        facts(current=server(serving=True), next=server(OLD)),
        ["rank 10000", "rebind", "stop next: the spec changed back"],
        None,
    ),
    (
        "a new spec, room for both",
        facts(current=server(OLD, serving=True)),
        ["rank 10000", "start next"],
        None,
    ),
    (
        "a new spec, room for one",
        facts(gib=5, current=server(OLD, 5, serving=True)),
        [
            "rank 10000",
            "stop current: recreated with the new spec (no room for both servers)",
            "announce Recreating",
        ],
        None,
    ),
    (
        "a new spec that does not fit",
        facts(gib=9, current=server(OLD, serving=True)),
        ["rank 10000", "announce InsufficientMemory"],
        None,
    ),
    (
        "a new spec refused before",
        facts(current=server(OLD, serving=True), remembered=Remembered("u1", refused_identity=WANTED)),
        ["rank 10000"],
        None,
    ),
    (
        "the spec changed again",
        facts(current=server(OLD, serving=True), next=server("another")),
        ["rank 10000", "stop next: the spec changed again", "start next"],
        None,
    ),
    (
        "the new server serves",
        facts(current=server(OLD, serving=True), next=server(serving=True, port=40002)),
        ["rank 10000", "promote", "announce RolledOut"],
        None,
    ),
    (
        "the new server starts",
        facts(current=server(OLD, serving=True), next=server(crashes=1)),
        ["rank 10000"],
        None,
    ),
    (
        "the new server keeps failing",
        facts(
            current=server(OLD, serving=True), next=server(crashes=2, report=("CrashLoopBackOff", "exit 1"))
        ),
        ["rank 10000", "stop next: its server kept failing", "announce RolloutFailed"],
        None,
    ),
    (
        "made again under the name",
        facts(current=server(serving=True), remembered=Remembered("u0")),
        [f"stop current: {REPLACED}", "start current"],
        None,
    ),
]


@pytest.mark.parametrize(("what", "given", "actions", "reason"), CASES, ids=[c[0] for c in CASES])
def test_plan_service(what: str, given: ServiceFacts, actions: list[str], reason: str | None) -> None:
    plan = plan_service(given)
    assert steps(plan) == actions
    assert (plan.report[0] if plan.report else None) == reason


@pytest.mark.parametrize("verdict", [Verdict.REMOVE, Verdict.STOP])
def test_a_service_not_served_is_forgotten(verdict: Verdict) -> None:
    assert plan_service(facts(verdict=verdict)).remembered is None


def test_what_it_keeps_between_steps() -> None:
    started = plan_service(facts(remembered=UNDER_PRESSURE))
    assert started.remembered == Remembered("u1")  # runs again: the eviction is no longer said
    waiting = plan_service(facts(gib=9, remembered=EVICTED_BEFORE))
    assert waiting.remembered == EVICTED_BEFORE
    assert waiting.report is not None and waiting.report[1].startswith(EVICTED_BEFORE.evicted)
    failing = facts(
        current=server(OLD, serving=True), next=server(crashes=2, report=("CrashLoopBackOff", "exit 1"))
    )
    refused = plan_service(failing).remembered
    assert refused is not None and refused.refused_identity == WANTED
    assert plan_service(facts(gib=9, current=server(OLD, serving=True))).remembered == Remembered(
        "u1", refused_identity=WANTED
    )
    assert plan_service(facts(remembered=None)).remembered == Remembered("u1")
    assert plan_service(facts(remembered=Remembered("u0"))).remembered == Remembered("u1")


def test_when_it_looks_again() -> None:
    assert (
        plan_service(facts(serving=Serving(FetchFailed("ModelFetchFailed", "404", 130.0)))).retry_at == 130.0
    )
    missing = plan_service(facts(serving=Serving(FILE, GIB, KeyMissing("no master key"))))
    assert missing.retry_at == 100.0 + KEY_RETRY and missing.report == ("StartingServer", "no master key")
    assert plan_service(facts()).retry_at is None


def test_what_an_evicted_service_and_the_events_say() -> None:
    plan = plan_service(facts(gib=4, others=(low(6),)))
    evict = plan.actions[0]
    assert evict == Evict(
        "ai/low", "evicted by the host agent mac-1 to make room for ai/chat (priority 10000, needs ~4.0 GiB)"
    )
    start = plan.actions[1]
    assert isinstance(start, Start) and (start.need, start.priority, start.protected) == (
        4 * GIB,
        NORMAL,
        False,
    )
    rolled = plan_service(facts(current=server(OLD, serving=True), next=server(serving=True, port=40002)))
    assert rolled.actions[-1] == Announce(
        "Normal", "RolledOut", "serving the new spec on port 40002; the previous server drains"
    )
    failing = facts(
        current=server(OLD, serving=True), next=server(crashes=2, report=("CrashLoopBackOff", "exit 1"))
    )
    assert plan_service(failing).actions[-1] == Announce(
        "Warning",
        "RolloutFailed",
        "the new spec's server keeps failing: still serving the previous one; exit 1",
    )
