#!/usr/bin/env python3
"""Write llmkube/plan/agent/llama_server_flags.py from the pinned llama-server's own `--help`.

    python hack/gen-llama-server-flags.py [LLAMA_SERVER]

Without an argument, the node tier's llama-server (extracted from the llama-server image that
`make node-prereqs` builds). The host agent judges a spec's extraArgs by this table (every flag of
the server, the words that spell it, how many values it takes);
tests/integration/test_agent_server_flags_llama.py holds the committed file to the binary, so a new
llama.cpp cannot slip a flag past the allowlist.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmkube.plan.agent.help_table import parse_help, render  # noqa: E402

TARGET = ROOT / "llmkube" / "plan" / "agent" / "llama_server_flags.py"


def main() -> int:
    if len(sys.argv) > 1:
        binary = Path(sys.argv[1])
    else:
        from llmkube_testing.host_llama_server import extract

        binary = extract()
    help_text = subprocess.run(
        [str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False
    ).stdout
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    found = re.search(r"version: (\S+)", version.stdout + version.stderr)
    table = parse_help(help_text)
    TARGET.write_text(render(table, found.group(1) if found else "unknown"))
    print(f"{TARGET.relative_to(ROOT)}: {len(table)} flags")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
