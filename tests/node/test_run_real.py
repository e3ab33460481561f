"""`llmkube run --with-agent` (what `make run AGENT=1` starts) on a machine that allows a real node:
the tiny llama.cpp sample really serves, so does the metal sample through a host agent on this
machine and the ModelRouter in front of the tiny sample, and the curl line printed for each gets a
completion from the user's shell."""

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

from llmkube_testing.cluster import free_port
from llmkube_testing.node_cleanup import mounts_below
from llmkube_testing.pytest_plugin import require_node_tier
from node_support import TIMINGS, Stopwatch


def test_llmkube_run_serves_the_sample_from_a_loopback_url(tmp_path: Path) -> None:
    require_node_tier()
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    stderr = (tmp_path / "stderr.log").open("w")
    watch = Stopwatch()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llmkube.cli",
            "run",
            "--with-agent",
            "--serve-port",
            str(free_port()),
            "--log-format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    seen: list[str] = []
    try:
        while sum(line.strip().startswith("curl ") for line in seen) < 3:
            try:
                seen.append(lines.get(timeout=420 - watch.seconds()))
            except (queue.Empty, ValueError):
                raise AssertionError("no curl line from llmkube run:\n" + "".join(seen)) from None
        TIMINGS["llmkube run --with-agent -> both samples and the router Ready and answering (s)"] = (
            watch.seconds()
        )
        curls = [line.strip() for line in seen if line.strip().startswith("curl ")]
        assert any("tiny-metal (metal) is Ready" in line and "host agent" in line for line in seen)
        assert any("tiny-router (a ModelRouter in front of tiny-llama) is Ready" in line for line in seen)
        (routed,) = [curl for curl in curls if '"model":"tiny-llama"' in curl]
        for curl in curls:
            assert "http://127.0.0.1:" in curl
            # Exactly what a user would paste, from this machine's own network.
            result = subprocess.run(shlex.split(curl), capture_output=True, text=True, timeout=60, check=True)
            answer = json.loads(result.stdout)
            assert answer["usage"]["completion_tokens"] > 0
            if curl == routed:  # through the router: its headers name the backend that answered
                verbose = subprocess.run(
                    [*shlex.split(curl), "-D", "-"], capture_output=True, text=True, timeout=60, check=True
                )
                assert "x-llmkube-backend: tiny-llama" in verbose.stdout.lower(), verbose.stdout
            assert answer["choices"][0]["message"]["role"] == "assistant"
        kubeconfig = next(line.split("KUBECONFIG=", 1)[1].strip() for line in seen if "KUBECONFIG=" in line)
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=120)
        stderr.close()
    assert code == 0, (tmp_path / "stderr.log").read_text()[-3000:]
    log = (tmp_path / "stderr.log").read_text()
    assert "llmkube run: using a real node" in log
    assert mounts_below(str(Path(kubeconfig).parent / "node")) == []
    # The agent stopped with the run, and its llama-server with it (--stop-on-exit).
    assert left_running(str(Path(kubeconfig).parent / "agent")) == []


def left_running(directory: str) -> list[str]:
    """The command lines of the processes that still name `directory` (the run's agent's files)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if directory in command:
                    found.append(command)
    return found
