"""The host agent's process supervision, as a state machine on a fake clock: probes, the startup
timeout, unhealthy servers, crashes with backoff, CrashLoopBackOff, stops, and what each phase
publishes and reports."""

import signal

import pytest

from llmkube.plan.agent import supervision as sv
from llmkube.plan.agent.supervision import Action, Phase, Settings

S = Settings()


def run_until_serving(now: float = 100.0) -> sv.Supervision:
    state = sv.started(now)
    assert sv.due(state, now, S) is Action.PROBE
    return sv.probed(state, True, now + 1, S)


def crash(state: sv.Supervision, now: float, code: int | None = 1, sig: int | None = None) -> sv.Supervision:
    return sv.exited(
        state, code=code, signal_number=sig, stderr=["loading", "error: bad magic"], now=now, settings=S
    )


def test_a_new_process_is_probed_at_once_and_serves_once_it_answers() -> None:
    state = sv.started(100.0)
    assert (state.phase, sv.due(state, 100.0, S), sv.next_wakeup(state, S)) == (
        Phase.STARTING,
        Action.PROBE,
        100.0,
    )
    assert sv.endpoint_conditions(state) == sv.EndpointConditions(
        ready=False, serving=False, terminating=False
    )
    # Loading (llama-server answers 503): still starting, probed every second.
    loading = sv.probed(state, False, 100.0, S)
    assert loading.phase is Phase.STARTING and loading.failed_probes == 1
    assert sv.due(loading, 100.5, S) is None and sv.next_wakeup(loading, S) == 101.0
    serving = sv.probed(loading, True, 101.0, S)
    assert (serving.phase, serving.serving_since, serving.failed_probes) == (Phase.SERVING, 101.0, 0)
    assert sv.endpoint_conditions(serving) == sv.EndpointConditions(
        ready=True, serving=True, terminating=False
    )
    assert sv.report(serving, 101.0, S) is None
    # Serving: probed every 5 s.
    assert sv.next_wakeup(serving, S) == 106.0 and sv.due(serving, 105.9, S) is None
    assert sv.due(serving, 106.0, S) is Action.PROBE


def test_a_server_that_never_answers_is_killed_at_the_startup_timeout() -> None:
    state = sv.started(0.0)
    for second in range(300):
        state = sv.probed(state, False, float(second), S)
    assert sv.due(state, 299.5, S) is None
    assert sv.next_wakeup(state, S) == 300.0
    assert sv.due(state, 300.0, S) is Action.KILL
    why = sv.kill_reason(state, S)
    assert why == "it did not answer /health within 300 s"
    killing = sv.killed(state, why)
    assert sv.due(killing, 301.0, S) is None  # waiting for the exit
    after = sv.exited(killing, code=None, signal_number=signal.SIGKILL, stderr=[], now=301.0, settings=S)
    assert after.phase is Phase.EXITED and after.last_exit is not None
    assert after.last_exit.describe() == "llama-server was stopped: it did not answer /health within 300 s"


def test_failed_probes_withdraw_the_endpoint_then_restart_the_server() -> None:
    state = run_until_serving()
    for i in range(2):
        state = sv.probed(state, False, 110.0 + i, S)
        assert state.phase is Phase.SERVING  # below the threshold: still ready
    state = sv.probed(state, False, 112.0, S)
    assert state.phase is Phase.UNHEALTHY
    assert sv.endpoint_conditions(state) == sv.EndpointConditions(
        ready=False, serving=False, terminating=False
    )
    reason, message = sv.report(state, 112.0, S) or ("", "")
    assert reason == "ServerUnhealthy" and "failed 3 times in a row" in message
    # It recovers: serving again, its serving time kept.
    recovered = sv.probed(state, True, 113.0, S)
    assert (recovered.phase, recovered.serving_since) == (Phase.SERVING, 101.0)
    # It does not: killed after 60 s unhealthy.
    assert sv.due(state, 171.9, S) is Action.PROBE
    assert sv.due(state, 172.0, S) is Action.KILL
    assert "did not recover within 60 s" in sv.kill_reason(state, S)


@pytest.mark.parametrize(
    ("crashes", "delay"), [(1, 0.0), (2, 5.0), (3, 10.0), (4, 20.0), (5, 40.0), (8, 300.0), (200, 300.0)]
)
def test_backoff(crashes: int, delay: float) -> None:
    assert sv.backoff(crashes, S) == delay


def test_crashes_restart_with_backoff_and_are_reported() -> None:
    state = run_until_serving(100.0)
    first = crash(state, 120.0)
    assert (first.phase, first.crashes, first.restart_at) == (Phase.EXITED, 1, 120.0)
    assert sv.due(first, 120.0, S) is Action.RESTART
    reason, message = sv.report(first, 120.0, S) or ("", "")
    assert reason == "RestartingServer"  # one crash: under way, not yet a failure
    assert message == (
        "llama-server exited with code 1; its last output: loading | error: bad magic "
        "(1 crash; restarting now)"
    )
    again = sv.restarted(first, 120.0)
    assert (again.phase, again.restarts, again.crashes) == (Phase.STARTING, 1, 1)
    reason, message = sv.report(again, 121.0, S) or ("", "")
    assert reason == "RestartingServer" and "restart 1, 1 crash" in message
    # It crashes again while starting: CrashLoopBackOff, restarted after 5 s.
    second = crash(again, 121.0, code=None, sig=signal.SIGSEGV)
    assert (second.crashes, second.restart_at) == (2, 126.0)
    assert sv.due(second, 125.9, S) is None and sv.next_wakeup(second, S) == 126.0
    reason, message = sv.report(second, 121.0, S) or ("", "")
    assert reason == "CrashLoopBackOff"
    assert message.startswith("llama-server was killed by signal 11 (SIGSEGV)")
    assert message.endswith("(2 crashes in a row; restarting in 5 s)")
    assert sv.endpoint_conditions(second) == sv.EndpointConditions(
        ready=False, serving=False, terminating=False
    )


def test_a_process_that_served_long_enough_starts_the_crash_count_again() -> None:
    state = run_until_serving(0.0)
    state = crash(state, 10.0)
    state = sv.probed(sv.restarted(state, 10.0), True, 11.0, S)
    assert crash(state, 500.0).crashes == 2  # served 489 s: a crash loop still
    assert crash(state, 611.0).crashes == 1  # served 600 s: a new first crash, restarted at once


def test_stop_drains_then_force_kills() -> None:
    state = sv.stop(run_until_serving(0.0), 50.0, S)
    assert state.phase is Phase.STOPPING
    assert sv.endpoint_conditions(state) == sv.EndpointConditions(ready=False, serving=True, terminating=True)
    assert sv.report(state, 50.0, S) is None
    assert sv.due(state, 59.9, S) is None and sv.next_wakeup(state, S) == 60.0
    assert sv.due(state, 60.0, S) is Action.FORCE_KILL
    stopped = sv.exited(state, code=0, signal_number=None, stderr=[], now=55.0, settings=S)
    assert stopped.phase is Phase.STOPPED and stopped.crashes == 0  # a stop is no crash
    assert sv.endpoint_conditions(stopped) is None and sv.due(stopped, 1e9, S) is None
    assert sv.next_wakeup(stopped, S) is None


def test_stopping_a_crashed_service_cancels_its_restart() -> None:
    state = sv.stop(crash(run_until_serving(0.0), 10.0), 11.0, S)
    assert state.phase is Phase.STOPPED and sv.due(state, 1e9, S) is None


def test_probes_after_a_stop_change_nothing() -> None:
    state = sv.stop(run_until_serving(0.0), 5.0, S)
    assert sv.probed(state, True, 6.0, S) == state and sv.probed(state, False, 6.0, S) == state


def test_stderr_is_bounded_in_reports() -> None:
    lines = [f"line {i} " + "x" * 1000 for i in range(100)]
    state = sv.exited(run_until_serving(0.0), code=2, signal_number=None, stderr=lines, now=5.0, settings=S)
    assert state.last_exit is not None
    described = state.last_exit.describe()
    assert "line 99" in described and "line 91" not in described  # the last 8 lines
    assert len(described) < 8 * 260 + 100


def test_an_adopted_process_is_probed_before_it_counts_as_serving() -> None:
    state = sv.adopted(7.0)
    assert state.phase is Phase.STARTING and sv.due(state, 7.0, S) is Action.PROBE
    assert sv.probed(state, True, 7.1, S).phase is Phase.SERVING
