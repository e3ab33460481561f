"""A node tier leaves nothing behind: not when it stops, and not when its process is killed (its
janitor cleans up): no process, cgroup, mount, CNI or shim state, registry entry."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llmkube_testing import node_cleanup
from llmkube_testing.pytest_plugin import require_node_tier
from node_support import TIMINGS, Stopwatch, wait_for

# Starts a tier, runs a pod (sandbox, shim, overlay rootfs, token tmpfs, CNI veth), reports where
# everything is, then stops cleanly ("stop") or waits to be killed ("hold").
SCRIPT = """
import json, sys, time
from llmkube_testing.images import CURL
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import wait_until
cluster = NodeCluster(volumes=1).start()
admin = cluster.admin()
admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper", "namespace": "default"},
              "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": CURL.ref,
                       "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}})
wait_until(lambda: admin.get("v1", "Pod", "sleeper", "default")["status"].get("phase") == "Running",
           timeout=120, what="sleeper Running")
print(json.dumps({"run_id": cluster.run_id, "node_dir": str(cluster.node_dir), "cgroup": cluster.cgroup,
                  "socket": str(cluster.containerd_socket), "workdir": str(cluster.workdir)}), flush=True)
if sys.argv[1] == "stop":
    cluster.stop()
    print("stopped", flush=True)
else:
    time.sleep(3600)
"""


def start(mode: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait(timeout=30)
        pytest.fail(f"the tier did not start (exit {process.returncode})")
    return process, json.loads(line)


def leftovers(info: dict[str, Any]) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if info["node_dir"] in cmdline or info["workdir"] in cmdline:
                found.append(f"process {proc.name}: {cmdline[:120]}")
    found += [
        f"cgroup {h / info['cgroup']}"
        for h in node_cleanup.cgroup_hierarchies()
        if (h / info["cgroup"]).exists()
    ]
    found += [f"mount {m}" for m in node_cleanup.mounts_below(info["node_dir"])]
    if (node_cleanup.REGISTRY / f"{info['run_id']}.json").exists():
        found.append("registry entry")
    results = Path("/var/lib/cni/results")
    found += (
        [f"cni cache {f}" for f in results.glob(f"llmkube-{info['run_id']}-*")] if results.is_dir() else []
    )
    if Path(info["socket"]).exists():
        found.append(f"containerd socket {info['socket']}")
    return found


def test_stop_removes_everything() -> None:
    require_node_tier()
    process, info = start("stop")
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "stopped"
    assert process.wait(timeout=60) == 0
    assert leftovers(info) == []


def test_a_killed_run_is_cleaned_up_by_its_janitor() -> None:
    require_node_tier()
    process, info = start("hold")
    assert Path("/sys/fs/cgroup") and any(
        (h / info["cgroup"]).exists() for h in node_cleanup.cgroup_hierarchies()
    ), "the tier runs in its cgroup"
    watch = Stopwatch()
    os.kill(process.pid, signal.SIGKILL)  # no stop(), no atexit: only the janitor is left to clean
    process.wait(timeout=10)
    wait_for(lambda: not leftovers(info), within=90, what=f"the janitor to clean up: {leftovers(info)}")
    TIMINGS["killed run -> janitor cleaned up (s)"] = watch.seconds()
    janitor_log = Path(info["workdir"], "logs", "janitor.log").read_text()
    assert "its owner died; cleaned up" in janitor_log
