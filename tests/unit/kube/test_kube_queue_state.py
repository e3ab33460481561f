"""The workqueue contract (client-go's, with controller-runtime's priorities) as a table of scripted
operations."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from llmkube.kube.queue.state import QueueState

# Each step is a tuple: (op, *args).  Time starts at 0 and only moves with ("at", t).
#   ("add", key[, priority])          ("after", key, delay[, priority])
#   ("get", expected_key_or_None)     ("done", key)
#   ("len", n)  ("waiting", n)  ("shutdown",)  ("at", t)  ("prio", key, expected_priority_or_None)
CONTRACT = {
    "N adds before a get yield one processing": [
        ("add", "a"), ("add", "a"), ("add", "a"), ("len", 1), ("get", "a"), ("get", None),
    ],
    "FIFO among equal priorities": [
        ("add", "a"), ("add", "b"), ("add", "c"), ("get", "a"), ("get", "b"),
    ],
    "a key is never handed to two workers at once": [
        ("add", "a"), ("get", "a"), ("add", "a"), ("get", None), ("done", "a"), ("get", "a"),
    ],
    "a re-add while processing is deferred until done, other keys still flow": [
        ("add", "a"), ("get", "a"), ("add", "a"), ("add", "b"), ("get", "b"), ("get", None),
        ("done", "a"), ("get", "a"),
    ],
    "done without a re-add leaves nothing behind": [
        ("add", "a"), ("get", "a"), ("done", "a"), ("get", None),
    ],
    "re-adds while processing collapse into one": [
        ("add", "a"), ("get", "a"), ("add", "a"), ("add", "a"), ("done", "a"), ("get", "a"),
        ("done", "a"), ("get", None),
    ],
    "add_after is not ready before its time": [
        ("after", "a", 5.0), ("get", None), ("at", 4.999), ("get", None), ("at", 5.0), ("get", "a"),
    ],
    "add_after keeps the earlier ready time": [
        ("after", "a", 10.0), ("after", "a", 5.0), ("at", 5.0), ("get", "a"), ("done", "a"),
        ("at", 10.0), ("get", None),
    ],
    "a later add_after does not postpone": [
        ("after", "a", 5.0), ("after", "a", 10.0), ("at", 5.0), ("get", "a"),
    ],
    "an immediate add overrides a pending delay": [
        ("after", "a", 10.0), ("add", "a"), ("get", "a"), ("done", "a"), ("at", 10.0), ("get", None),
    ],
    "add_after on a ready key changes nothing": [
        ("add", "a"), ("after", "a", 10.0), ("get", "a"), ("done", "a"), ("at", 20.0), ("get", None),
    ],
    "add_after with zero delay is a plain add": [
        ("after", "a", 0.0), ("get", "a"),
    ],
    "a delayed re-add while processing waits for both its time and done": [
        ("add", "a"), ("get", "a"), ("after", "a", 5.0), ("at", 6.0), ("get", None), ("done", "a"),
        ("get", "a"),
    ],
    "done before the delay elapses: the key still waits for its time": [
        ("add", "a"), ("get", "a"), ("after", "a", 5.0), ("done", "a"), ("get", None), ("at", 5.0),
        ("get", "a"),
    ],
    "higher priority first": [
        ("add", "a", 0), ("add", "b", 10), ("add", "c", 5), ("get", "b"), ("get", "c"), ("get", "a"),
    ],
    "initial-list items are overtaken by real changes": [
        ("add", "x", -100), ("add", "y", -100), ("add", "z", 0), ("get", "z"), ("get", "x"),
        ("get", "y"),
    ],
    "a re-add keeps the higher priority": [
        ("add", "a", 5), ("add", "a", 0), ("prio", "a", 5), ("add", "a", 9), ("prio", "a", 9),
    ],
    "a raised priority moves the key forward": [
        ("add", "a"), ("add", "b"), ("add", "b", 3), ("get", "b"), ("get", "a"),
    ],
    "a delayed key keeps max priority once ready": [
        ("after", "a", 1.0, 7), ("add", "b", 1), ("after", "a", 3.0), ("at", 1.0), ("get", "a"),
        ("get", "b"),
    ],
    "len counts ready keys only": [
        ("add", "a"), ("after", "b", 5.0), ("len", 1), ("waiting", 1), ("get", "a"), ("len", 0),
        ("at", 5.0), ("get", "b"), ("len", 0),
    ],
    "shutdown ignores adds and drops delayed keys but hands out ready ones": [
        ("add", "a"), ("after", "b", 5.0), ("shutdown",), ("add", "c"), ("after", "d", 0.0),
        ("get", "a"), ("at", 10.0), ("get", None), ("waiting", 0),
    ],
    "done on an unknown key is harmless": [
        ("done", "zzz"), ("add", "a"), ("get", "a"),
    ],
}  # fmt: skip


@dataclass
class RecordingMetrics:
    events: list[tuple[str, object]] = field(default_factory=list)

    def added(self, priority: int) -> None:
        self.events.append(("added", priority))

    def reprioritised(self, old: int, new: int) -> None:
        self.events.append(("reprioritised", (old, new)))

    def handed_out(self, priority: int, waited: float) -> None:
        self.events.append(("handed_out", (priority, waited)))

    def finished(self, worked: float) -> None:
        self.events.append(("finished", worked))

    def retried(self) -> None:
        self.events.append(("retried", None))


def run_script(script: list[tuple[object, ...]], state: QueueState[str]) -> None:
    now = 0.0
    for step_number, (op, *args) in enumerate(script):
        where = f"step {step_number}: {(op, *args)}"
        if op == "at":
            now = float(args[0])  # type: ignore[arg-type]
        elif op == "add":
            state.add(args[0], now, *args[1:])  # type: ignore[arg-type]
        elif op == "after":
            state.add_after(args[0], args[1], now, *args[2:])  # type: ignore[arg-type]
        elif op == "get":
            assert state.get(now) == args[0], where
        elif op == "done":
            state.done(args[0], now)  # type: ignore[arg-type]
        elif op == "len":
            assert len(state) == args[0], where
        elif op == "waiting":
            assert state.waiting() == args[0], where
        elif op == "prio":
            assert state.priority_of(args[0]) == args[1], where  # type: ignore[arg-type]
        elif op == "shutdown":
            state.shut_down()
        else:  # pragma: no cover - a typo in the table
            raise AssertionError(f"unknown op {op}")


@pytest.mark.parametrize("script", list(CONTRACT.values()), ids=list(CONTRACT))
def test_workqueue_contract(script: list[tuple[object, ...]]) -> None:
    run_script(script, QueueState())


def test_metrics_count_adds_when_ready_and_latency_from_ready_time() -> None:
    sink = RecordingMetrics()
    state: QueueState[str] = QueueState(sink)
    state.add("a", 1.0)
    state.add("a", 1.5)  # deduplicated: no second add
    state.add_after("b", 2.0, 1.0)  # retry counted now, add counted when it becomes ready at t=3
    assert sink.events == [("added", 0), ("retried", None)]
    assert state.get(2.0) == "a"
    assert state.get(4.0) == "b"
    state.done("a", 6.0)
    assert sink.events[2:] == [
        ("handed_out", (0, 1.0)),
        ("added", 0),
        ("handed_out", (0, 1.0)),  # ready at 3.0, handed out at 4.0
        ("finished", 4.0),
    ]


def test_metrics_track_priority_moves() -> None:
    sink = RecordingMetrics()
    state: QueueState[str] = QueueState(sink)
    state.add("a", 0.0, -100)
    state.add("a", 0.0, 0)
    assert state.get(0.0) == "a"
    assert sink.events == [("added", -100), ("reprioritised", (-100, 0)), ("handed_out", (0, 0.0))]


def test_next_ready_at_skips_superseded_times() -> None:
    state: QueueState[str] = QueueState()
    state.add_after("a", 10.0, 0.0)
    state.add_after("a", 3.0, 0.0)
    state.add_after("b", 7.0, 0.0)
    assert state.next_ready_at() == 3.0
    assert state.get(3.0) == "a"
    assert state.next_ready_at() == 7.0  # a's stale row at 10 is gone
    assert state.get(7.0) == "b"
    assert state.next_ready_at() is None


def test_many_keys_keep_fifo_within_priority_bands() -> None:
    state: QueueState[int] = QueueState()
    for key in range(100):
        state.add(key, 0.0, priority=-100 if key % 2 else 0)
    order = [state.get(0.0) for _ in range(100)]
    assert order == list(range(0, 100, 2)) + list(range(1, 100, 2))
