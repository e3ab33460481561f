"""`make run` (`llmkube run` without a cluster) as a person uses it: started from a terminal, it
listens on free loopback ports (never fighting another program for :8080/:8081), and Ctrl-C
(SIGINT to the terminal's whole process group) stops the controller before the control plane, so
no service is reported Failed and no reconcile waits on a dead API server while it shuts down."""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest


def records(log: Path) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _time(record: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(record["ts"]).replace("Z", "+00:00"))


def wait_for(check: Any, within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    raise TimeoutError(f"{what} after {within}s")


@pytest.mark.timeout(240)
def test_run_uses_loopback_ports_and_ctrl_c_stops_the_controller_first(tmp_path: Path) -> None:
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["LLMKUBE_LOG_FORMAT"] = "json"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        # Its own session, like a shell's foreground job: the signal goes to the whole group.
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llmkube.cli",
                "run",
                "--tier=full",
                f"--model-cache-path={tmp_path / 'cache'}",
            ],
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    try:
        listening = wait_for(
            lambda: [r for r in records(err) if r.get("msg") == "listening"][1:],
            120,
            "both endpoints listening",
        )
        addresses = {r["endpoint"]: r["address"] for r in records(err) if r.get("msg") == "listening"}
        assert set(addresses) == {"metrics", "health"}, listening
        assert all(a.startswith("http://127.0.0.1:") for a in addresses.values()), addresses
        assert not {a.rsplit(":", 1)[1] for a in addresses.values()} & {"8080", "8081"}

        def sample_ready() -> bool:
            return any(
                r.get("msg") == "status written"
                and r.get("phase") == "Ready"
                and r.get("name") == "tinyllama"
                for r in records(err)
            )

        wait_for(sample_ready, 90, "the sample Ready")
        # The control-plane components are in sessions of their own: the terminal's signal
        # cannot reach them, only the process that stops them after its controller.
        components = children(process.pid)
        assert len(components) >= 5, components  # etcd, apiserver, controller-manager, scheduler, kwok
        assert all(os.getsid(pid) != os.getsid(process.pid) for pid in components)
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        assert process.wait(timeout=90) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    logged = records(err)
    signal_at = next(
        i for i, r in enumerate(logged) if r.get("msg") == "signal received: shutting down gracefully"
    )
    after = logged[signal_at:]
    assert [r for r in after if r.get("phase") == "Failed"] == [], (
        "a service was reported Failed during shutdown"
    )
    stopped = next(r for r in after if r.get("msg") == "stopped")
    # With the control plane alive the workers drain at once; with it killed by the same Ctrl-C, a
    # reconcile waited on the dead API server until the 30 s drain deadline.
    seconds = (_time(stopped) - _time(after[0])).total_seconds()
    assert seconds < 10, f"the controller took {seconds:.1f}s to stop"
    assert all("ts" in r and "level" in r and "msg" in r for r in logged)
    # The control plane was still answering while the controller stopped: no connection errors.
    assert not [r for r in after if r.get("level") == "error"], [
        r for r in after if r.get("level") == "error"
    ]
