"""What the host agent does about one service now: one pure step, from what it observed to a value.

    the agent observes                           plan_service decides            the agent performs
    its InferenceService and Model (assignment)   stop, set aside, start, roll,   the servers (runners),
    its model file, the memory it needs, its key  promote, rank, rebind;          evictions, Events,
    its servers' states, the others' memory,      whom to evict; the Events;      the state file, and
    the host's pressure, what it remembers        what to report; when to look    the slice (the report)

The verdict (`assignment`) comes first, because only a service to serve needs its model file,
memory need and key looked at, in that order (each only once the one before is known). For a
service it serves:

    the model file is on its way, or failed        say so (a failure: look again when it may retry)
    its need cannot be estimated, its key missing  say so (the key: look again in KEY_RETRY s)
    no server yet                                  admit it (evicting lower priorities), or say why not
    its server serves this spec                    keep it (its restarts use this spec's command)
    its server serves another spec                 roll in place when both fit, else recreate, else
                                                   keep the old one and say the new one does not fit
    the new spec's server serves                   promote it; the old one drains
    the new spec's server keeps failing            stop it; the old one keeps serving (RolloutFailed)

Memory between steps (`Remembered`): why it was evicted (it says so until it runs again, and a
service evicted under pressure waits for the pressure to end), and a new spec that could not roll
out (not tried again until the spec changes).
"""

from dataclasses import dataclass, field, replace
from typing import Literal

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.agent.admission import Demand, Resident, admit, eviction_message
from llmkube.plan.agent.artifact import Artifact, FetchFailed, Fetching
from llmkube.plan.agent.assignment import Assignment, Verdict
from llmkube.plan.agent.launch import KEY_RETRY, Host, KeyFile, KeyMissing, Launch
from llmkube.plan.agent.rollout import Strategy, roll_plan
from llmkube.plan.inferenceservice.metal import (
    AGENT_FETCHING_MODEL,
    AGENT_STARTING,
    EVICTED,
    INSUFFICIENT_MEMORY,
    UNSUPPORTED_BY_AGENT,
)

Report = tuple[str, str]  # (reason, message), as the slice carries it
Role = Literal["current", "next"]  # the server the slice points at; a new spec's, starting beside it

REPLACED = "the InferenceService was replaced by a new one of the same name"


# -- what the agent observed ----------------------------------------------------------------------
@dataclass(frozen=True)
class Server:
    """One server of the service, as its runner is now."""

    identity: str  # what it serves (Launch.identity)
    need: int
    started_at: float  # the agent's monotonic clock
    serving: bool = False
    stopping: bool = False
    crashes: int = 0  # in a row
    port: int | None = None  # while a process runs
    report: Report | None = None  # what it says while it does not serve


@dataclass(frozen=True)
class Remembered:
    """What the agent keeps about a service it serves, from one step to the next."""

    uid: str  # the InferenceService's (one made again under the name is another)
    #: why it was stopped to make room (said until it runs again)
    evicted: str = ""
    evicted_under_pressure: bool = False
    #: a new spec that could not roll out (its server kept failing, or did not fit): not retried
    refused_identity: str = ""


@dataclass(frozen=True)
class Memory:
    budget: int
    others: tuple[Resident, ...] = ()  # the other services' live servers
    held: int = 0  # what every live server holds, this service's too
    pressure: bool = False  # the host is under memory pressure


@dataclass(frozen=True)
class Serving:
    """What serving it takes, as far as the agent looked (a service it serves only)."""

    artifact: Artifact
    need: int | None = None  # None: it cannot be estimated (looked at once the file is there)
    key: KeyFile | KeyMissing | None = None  # looked at once the need is known


@dataclass(frozen=True)
class ServiceFacts:
    key: str  # namespace/name
    agent: str  # this agent's name (what an evicted service is told)
    binary: str  # llama-server
    host: Host
    isvc: InferenceService | None
    model: Model | None
    assignment: Assignment
    memory: Memory
    now: float  # the agent's monotonic clock
    remembered: Remembered | None = None  # None: not served yet
    current: Server | None = None
    next: Server | None = None
    draining: bool = False  # servers of it set aside earlier are still listed
    serving: Serving | None = None
    crash_loop_after: int = 2  # supervision.Settings': crashes that make a new spec's server failed


# -- what it does ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stop:
    """Stop the server in `role` and set it aside (it is gone from the slice; it drains off)."""

    role: Role
    reason: str


@dataclass(frozen=True)
class SetAside:
    """The server in `role` is stopping already: set it aside."""

    role: Role


@dataclass(frozen=True)
class Start:
    role: Role
    launch: Launch
    need: int
    priority: int
    protected: bool


@dataclass(frozen=True)
class Promote:
    """The new spec's server serves: the slice points at it, the old one retires (drains)."""


@dataclass(frozen=True)
class Rank:
    """The current server's priority and protection, by which it may be evicted."""

    priority: int
    protected: bool


@dataclass(frozen=True)
class Rebind:
    """The current server serves this spec: its restarts use this launch (an adopted server's
    recorded command names a descriptor of the agent that started it)."""

    launch: Launch


@dataclass(frozen=True)
class Evict:
    """Another service stops to make room; it is told `message`, and looks again."""

    key: str
    message: str


@dataclass(frozen=True)
class Announce:
    """An Event on the service."""

    type: str
    reason: str
    message: str


Action = Stop | SetAside | Start | Promote | Rank | Rebind | Evict | Announce


@dataclass(frozen=True)
class ServicePlan:
    actions: tuple[Action, ...] = ()
    #: what to keep about it; None: it is not served (stop, delete its slice, forget it once its
    #: servers are gone)
    remembered: Remembered | None = None
    report: Report | None = None  # what its slice says while no server serves
    retry_at: float | None = None  # when to look again (monotonic), besides the slice's heartbeat


def plan_service(facts: ServiceFacts) -> ServicePlan:
    steps = _Steps(facts)
    verdict, remembered, isvc = facts.assignment.verdict, facts.remembered, facts.isvc
    uid = (isvc.metadata.uid or "") if isvc is not None else ""
    if isvc is not None and remembered is not None and remembered.uid and remembered.uid != uid:
        steps.stop_all(REPLACED)  # the old one's servers are not the new one's
    if verdict in (Verdict.REMOVE, Verdict.STOP):
        steps.stop_all(
            "spec.replicas is 0" if verdict is Verdict.STOP else "the service is gone, or not this agent's"
        )
        return ServicePlan(tuple(steps.actions))
    steps.remembered = replace(remembered, uid=uid) if remembered is not None else Remembered(uid)
    if verdict is Verdict.UNSUPPORTED:
        steps.stop_all("this agent cannot serve it")
        return steps.plan((UNSUPPORTED_BY_AGENT, facts.assignment.message))
    if (
        verdict is Verdict.SERVE
        and isvc is not None
        and facts.model is not None
        and facts.serving is not None
    ):
        return _serve(steps, facts, isvc, facts.model, facts.serving)
    return steps.plan()  # KEEP: start nothing, stop nothing


def _serve(
    steps: "_Steps", facts: ServiceFacts, isvc: InferenceService, model: Model, serving: Serving
) -> ServicePlan:
    artifact, need, key = serving.artifact, serving.need, serving.key
    if isinstance(artifact, Fetching):
        return steps.plan((AGENT_FETCHING_MODEL, artifact.message))
    if isinstance(artifact, FetchFailed):
        return steps.plan((artifact.reason, artifact.message), retry_at=artifact.retry_at)
    if need is None:
        return steps.plan(
            (
                INSUFFICIENT_MEMORY,
                "its memory need cannot be estimated: the model file's GGUF header cannot be read; set "
                "hardware.memoryBudget on its Model",
            )
        )
    if not isinstance(key, KeyFile):
        message = key.message if key is not None else "the server key is not read yet"
        return steps.plan((AGENT_STARTING, message), retry_at=facts.now + KEY_RETRY)
    launch = Launch(facts.binary, isvc, model, facts.host, artifact, key)
    wanted = _Wanted(
        launch, launch.identity(), need, facts.assignment.priority, bool(isvc.spec.eviction_protection)
    )
    if steps.current is not None and steps.current.stopping:
        steps.set_aside("current")
    if steps.current is None:
        return _start(steps, facts, wanted)
    return _roll(steps, facts, wanted, steps.current)


@dataclass(frozen=True)
class _Wanted:
    """The server this spec wants."""

    launch: Launch
    identity: str
    need: int
    priority: int
    protected: bool

    def start(self, role: Role) -> Start:
        return Start(role, self.launch, self.need, self.priority, self.protected)


def _start(steps: "_Steps", facts: ServiceFacts, wanted: _Wanted) -> ServicePlan:
    """No server serves it: start one if it fits (evicting lower priorities), else say why not."""
    remembered, memory = steps.remembered, facts.memory
    assert remembered is not None
    if remembered.evicted_under_pressure and memory.pressure:
        return steps.plan(
            (EVICTED, f"{remembered.evicted}; it starts again once the host's memory pressure is over")
        )
    if steps.draining and memory.held + wanted.need > memory.budget:
        return steps.plan((AGENT_STARTING, "waiting for its previous server to stop (no room for both)"))
    admission = admit(Demand(facts.key, wanted.need, wanted.priority), memory.others, memory.budget)
    if not admission.admitted:
        if remembered.evicted:
            return steps.plan(
                (EVICTED, f"{remembered.evicted}; it starts again once it fits: {admission.reason}")
            )
        return steps.plan((INSUFFICIENT_MEMORY, admission.reason))
    steps.evict(admission.evict, wanted)
    steps.remembered = replace(remembered, evicted="", evicted_under_pressure=False)
    steps.add(wanted.start("current"))
    return steps.plan()


def _roll(steps: "_Steps", facts: ServiceFacts, wanted: _Wanted, current: Server) -> ServicePlan:
    """A server serves it: keep it for this spec, or roll this spec out."""
    steps.add(Rank(wanted.priority, wanted.protected))
    if current.identity == wanted.identity:
        steps.add(Rebind(wanted.launch))
        if steps.next is not None:  # the spec went back: the new server is not wanted
            steps.stop("next", "the spec changed back")
        return steps.plan()
    nxt = steps.next
    if nxt is not None and nxt.identity != wanted.identity:
        steps.stop("next", "the spec changed again")
        nxt = None
    remembered = steps.remembered
    assert remembered is not None
    if nxt is None:
        if remembered.refused_identity != wanted.identity:
            _begin_roll(steps, facts, wanted, current)
    elif nxt.serving:
        steps.add(Promote())
        steps.announce(
            "Normal", "RolledOut", f"serving the new spec on port {nxt.port}; the previous server drains"
        )
    elif nxt.crashes >= facts.crash_loop_after:
        steps.stop("next", "its server kept failing")
        steps.remembered = replace(remembered, refused_identity=wanted.identity)
        message = nxt.report[1] if nxt.report is not None else ""
        steps.announce(
            "Warning",
            "RolloutFailed",
            f"the new spec's server keeps failing: still serving the previous one; {message}",
        )
    return steps.plan()


def _begin_roll(steps: "_Steps", facts: ServiceFacts, wanted: _Wanted, current: Server) -> None:
    memory = facts.memory
    old = Resident(facts.key, current.need, wanted.priority, wanted.protected, current.started_at)
    roll = roll_plan(
        Demand(facts.key, wanted.need, wanted.priority), old, [*memory.others, old], memory.budget
    )
    if roll.strategy is Strategy.IN_PLACE:
        steps.add(wanted.start("next"))
    elif roll.strategy is Strategy.RECREATE:
        steps.evict(roll.admission.evict, wanted)
        steps.stop("current", "recreated with the new spec (no room for both servers)")
        steps.announce(
            "Normal",
            "Recreating",
            "the new spec's server needs the old one's memory: the old one stops first",
        )
    else:
        assert steps.remembered is not None
        steps.remembered = replace(steps.remembered, refused_identity=wanted.identity)
        steps.announce(
            "Warning",
            INSUFFICIENT_MEMORY,
            f"the new spec does not fit ({roll.admission.reason}): still serving the previous one",
        )


@dataclass
class _Steps:
    """The plan being made: its actions so far, and the servers as they will be after them."""

    facts: ServiceFacts
    actions: list[Action] = field(default_factory=list)
    remembered: Remembered | None = None
    current: Server | None = None
    next: Server | None = None
    draining: bool = False

    def __post_init__(self) -> None:
        self.current, self.next, self.draining = self.facts.current, self.facts.next, self.facts.draining

    def add(self, action: Action) -> None:
        self.actions.append(action)

    def stop(self, role: Role, reason: str) -> None:
        self.add(Stop(role, reason))
        self._aside(role)

    def set_aside(self, role: Role) -> None:
        self.add(SetAside(role))
        self._aside(role)

    def stop_all(self, reason: str) -> None:
        roles: tuple[Role, ...] = ("current", "next")
        for role in roles:
            if getattr(self, role) is not None:
                self.stop(role, reason)

    def evict(self, victims: tuple[Resident, ...], wanted: _Wanted) -> None:
        facts = self.facts
        for victim in victims:
            self.add(
                Evict(victim.key, eviction_message(facts.agent, facts.key, wanted.priority, wanted.need))
            )

    def announce(self, type_: str, reason: str, message: str) -> None:
        self.add(Announce(type_, reason, message))

    def plan(self, report: Report | None = None, *, retry_at: float | None = None) -> ServicePlan:
        return ServicePlan(tuple(self.actions), self.remembered, report, retry_at)

    def _aside(self, role: Role) -> None:
        setattr(self, role, None)
        self.draining = True
