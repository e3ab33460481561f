"""The release tools the install and monitoring tests drive (helm, promtool, kustomize), built by
hack/build-tools.sh from pinned versions into ~/.cache/llmkube/tools/bin."""

import os
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD_COMMAND = "bash hack/build-tools.sh"


def tools_bin() -> Path:
    if explicit := os.environ.get("LLMKUBE_TOOLS_BIN"):
        return Path(explicit)
    cache = os.environ.get("LLMKUBE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "llmkube"
    )
    return Path(cache) / "tools" / "bin"


def without_build(reason: str) -> NoReturn:
    """A test whose build is missing: skipped where the machine cannot have it, but a failure
    while `make test` is still building it (hack/test.sh sets LLMKUBE_BUILDS_PENDING for the passes
    that run while a build is under way): such a test belongs to a later pass, and a skip there
    would hide it."""
    if os.environ.get("LLMKUBE_BUILDS_PENDING"):
        pytest.fail(
            f"{reason}; it is being built in the background: mark the test `tools` or `node_prereqs` "
            "(tests/conftest.py) so that make test runs it once the build is done",
            pytrace=False,
        )
    pytest.skip(reason)


def tool(name: str) -> Path:
    path = tools_bin() / name
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"{name} is missing in {tools_bin()}. Build it with: {BUILD_COMMAND} {name}", pytrace=False
        )
    return path


def run(*argv: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    """Run a tool; on failure the assertion shows its output."""
    result = subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, argv))} failed ({result.returncode}):\n{result.stderr}{result.stdout}"
    )
    return result.stdout


def kustomize_build(path: Path) -> str:
    return run(tool("kustomize"), "build", path)


def kustomize_overlay(directory: Path, *components: str) -> str:
    """`kustomize build` of manifests/ with some of its components, the way a user's own kustomization
    references them (manifests/ linked into a temporary directory)."""
    link = directory / "manifests"
    if not link.exists():
        link.symlink_to(ROOT / "manifests")
    lines = ["resources: [manifests]", "components:", *[f"  - manifests/{c}" for c in components]]
    (directory / "kustomization.yaml").write_text("\n".join(lines) + "\n")
    return kustomize_build(directory)
