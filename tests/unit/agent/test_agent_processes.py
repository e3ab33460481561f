"""The fingerprint a server is adopted by: taken when the agent starts it, it must match the same
process when the next agent reads it, however soon after the exec it was taken (Linux lays out a
new program's arguments after Popen has returned, so an early read of /proc/<pid>/cmdline can be
empty; a fingerprint taken then made the node tier's second agent take its server for gone)."""

import sys
from pathlib import Path

import pytest

from llmkube.agent.processes import adopt, settled_fingerprint, spawn

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_server_started_now_is_adopted_by_its_fingerprint_every_time(tmp_path: Path) -> None:
    started = []
    try:
        for index in range(40):
            command = ["sleep", "30"]
            process = spawn(command, tmp_path / f"log-{index}", port=0)
            started.append(process)
            assert process.fingerprint.endswith(" ".join(command)), process.fingerprint
            again = adopt(process.pid, command, 0, process.log_path, process.fingerprint)
            assert again is not None and again.pid == process.pid
    finally:
        for process in started:
            assert process.popen is not None
            process.popen.kill()
            process.popen.wait()


def test_a_process_that_ends_at_once_does_not_hold_the_agent(tmp_path: Path) -> None:
    process = spawn(["false"], tmp_path / "log", port=0)
    assert process.popen is not None
    process.popen.wait()
    # Gone: nothing to read, and no wait for a command line that never comes.
    assert settled_fingerprint(process.pid, ["false"], lambda: True, within=5) == ""


def test_a_fingerprint_recorded_before_the_command_line_was_there_still_adopts_its_process(
    tmp_path: Path,
) -> None:
    command = ["sleep", "30"]
    process = spawn(command, tmp_path / "log", port=0)
    assert process.popen is not None
    try:
        early = process.fingerprint.removesuffix(" ".join(command))
        assert early.endswith(":")  # "<boot>:<start>:", as an earlier agent could record it
        assert adopt(process.pid, command, 0, process.log_path, early) is not None
        # ... but not for another command, nor another start time.
        assert adopt(process.pid, ["sleep", "31"], 0, process.log_path, early) is None
        boot, start, _ = early.split(":")
        assert adopt(process.pid, command, 0, process.log_path, f"{boot}:{int(start) + 1}:") is None
    finally:
        process.popen.kill()
        process.popen.wait()
