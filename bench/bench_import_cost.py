"""What the controller process pays before it does anything: import time and resident memory.

Runs a fresh interpreter that imports what `llmkube controller` imports, as it does (the GC paused,
JSON logs, so no rich), and loads a token kubeconfig (the in-cluster case reads the same way), then
reports its RSS, the import time and CPU, the number of modules, the top-level packages by
cumulative import time (`python -X importtime`) and what each heavy optional package would add if
it were imported too.

Usage: .venv/bin/python bench/bench_import_cost.py
Prints one JSON object.
"""

import json
import subprocess
import sys
import tempfile
import textwrap
from collections import defaultdict
from pathlib import Path

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""

PROBE = """
import asyncio, sys, time
def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
base = rss_mib()
started, cpu = time.perf_counter(), time.process_time()
import llmkube.cli
llmkube.cli.parse_and_load(["controller", "--log-format=json"])  # as `llmkube controller` starts
from llmkube.kube.rest.config import load_client_config
asyncio.run(load_client_config({path!r}))
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
result = {{
    "interpreter_rss_mib": round(base, 1),
    "rss_after_import_mib": round(rss_mib(), 1),
    "import_seconds": round(seconds, 3),
    "import_cpu_seconds": round(cpu, 3),
    "modules": len(sys.modules),
    "heavy_packages_loaded": sorted(
        m for m in ("kubernetes_asyncio", "gguf", "numpy", "cryptography", "rich")
        if sys.modules.get(m) is not None  # None: marked absent
    ),
}}
extra = {{}}
for name in {optional!r}:
    before = rss_mib()
    try:
        __import__(name)
    except ImportError:
        continue
    extra[name] = round(rss_mib() - before, 1)
result["would_add_mib"] = extra
print(__import__("json").dumps(result))
"""

#: Packages the controller imports only when a feature needs them (credential plugins, GGUF reads).
OPTIONAL = ("kubernetes_asyncio", "gguf")


def top_packages(importtime_log: str, limit: int = 12) -> dict[str, float]:
    """Self import time per top-level package, in ms (from ``-X importtime`` lines)."""
    totals: dict[str, float] = defaultdict(float)
    for line in importtime_log.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.removeprefix("import time:").split("|")
        totals[name.strip().split(".")[0]] += int(self_us) / 1000
    return {name: round(ms, 1) for name, ms in sorted(totals.items(), key=lambda kv: -kv[1])[:limit]}


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "kubeconfig"
        path.write_text(KUBECONFIG)
        probe = textwrap.dedent(PROBE.format(path=str(path), optional=OPTIONAL))
        measured = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        without_optional = textwrap.dedent(PROBE.format(path=str(path), optional=()))
        timed = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", without_optional],
            capture_output=True,
            text=True,
            check=True,
        )
    result = json.loads(measured.stdout)
    result["self_import_ms_by_package"] = top_packages(timed.stderr)
    result["python"] = sys.version.split()[0]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
