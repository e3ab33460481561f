#!/usr/bin/env python3
"""Write the image's locked requirements from pyproject.toml (`make lock`):

  requirements/controller.txt   [project].dependencies: what the controller image installs
  requirements/build.txt        [build-system].requires: what builds the llmkube wheel in the image

Every version pinned, every file's sha256 listed (pip --require-hashes), resolved for Python 3.11
on any platform (uv --universal). Run after changing either list; tests/unit/install checks the
lock still satisfies pyproject.toml. Needs PyPI.
"""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON_VERSION = "3.11"  # the image's (python:3.11-slim, or Debian bookworm's python3)
UV = [sys.executable, "-m", "uv", "pip", "compile", "--quiet", "--generate-hashes", "--universal"]


def compile_requirements(source: str, output: Path, stdin: str | None = None) -> None:
    print(f"[lock] {output.relative_to(ROOT)}", file=sys.stderr)
    subprocess.run(
        [
            *UV,
            *("--python-version", PYTHON_VERSION, "--custom-compile-command", "make lock"),
            *("--output-file", str(output), source),
        ],
        input=stdin,
        text=True,
        check=True,
        cwd=ROOT,
    )


def main() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (ROOT / "requirements").mkdir(exist_ok=True)
    compile_requirements("pyproject.toml", ROOT / "requirements" / "controller.txt")
    build_requires = "\n".join(pyproject["build-system"]["requires"]) + "\n"
    compile_requirements("-", ROOT / "requirements" / "build.txt", stdin=build_requires)


if __name__ == "__main__":
    main()
