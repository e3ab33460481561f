"""`make help` lists every target of the Makefile with what it does (the `##` comment above it)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def phony_targets() -> list[str]:
    (line,) = [line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith(".PHONY:")]
    return line.removeprefix(".PHONY:").split()


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_help_describes_every_target() -> None:
    result = subprocess.run(
        ["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    described = dict(re.findall(r"^  ([a-z][a-z0-9-]*) +(\S.*)$", result.stdout, flags=re.MULTILINE))
    targets = phony_targets()
    assert len(targets) > 20
    assert [t for t in targets if t not in described] == []
    assert described["dist"].startswith("Everything a release publishes")
    assert "$$" not in result.stdout  # make's escape is not shown
