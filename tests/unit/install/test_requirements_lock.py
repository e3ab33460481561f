"""The image's locked requirements (requirements/*.txt, `make lock`) agree with pyproject.toml, and
the image installs from them with hashes: a dependency added, dropped or narrowed in pyproject.toml
without `make lock` fails here, not in the image build."""

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: The testing extra and what the controller stopped needing: never in the image.
NEVER_IN_THE_IMAGE = {"cryptography", "gguf", "numpy", "kubernetes-asyncio", "requests", "tqdm"}


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    hashes: int
    via: frozenset[str]


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def read_lock(path: Path) -> dict[str, Pin]:
    """The entries of a uv/pip-compile file: name==version, its --hash lines and `# via` sources
    (`# via x` on one line, or `# via` then one `#   x` line per source)."""
    entries: list[tuple[str, str, int, list[str]]] = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if match := _PIN.match(line):
            entries.append((canonicalize_name(match[1]), match[2], 0, []))
        elif not entries:
            continue
        elif stripped.startswith("--hash=sha256:"):
            name, version, hashes, via = entries[-1]
            entries[-1] = (name, version, hashes + 1, via)
        elif stripped.startswith("# via "):
            entries[-1][3].append(stripped.removeprefix("# via ").strip())
        elif stripped.startswith("#   "):
            entries[-1][3].append(stripped.removeprefix("#").strip())
    return {name: Pin(name, version, hashes, frozenset(via)) for name, version, hashes, via in entries}


def pip_installs(dockerfile: str) -> list[str]:
    """Every `pip ... install ...` command of the Dockerfile's RUN instructions."""
    joined = dockerfile.replace("\\\n", " ")
    commands = [
        command.strip()
        for line in joined.splitlines()
        if line.startswith("RUN ")
        for command in line.removeprefix("RUN ").split("&&")
    ]
    return [" ".join(c.split()) for c in commands if re.match(r"\S*pip( --python \S+)? install ", c)]


CONTROLLER = read_lock(ROOT / "requirements" / "controller.txt")
BUILD = read_lock(ROOT / "requirements" / "build.txt")


@pytest.mark.parametrize(
    ("lock", "requirements"),
    [
        (CONTROLLER, PYPROJECT["project"]["dependencies"]),
        (BUILD, PYPROJECT["build-system"]["requires"]),
    ],
    ids=["controller", "build"],
)
def test_every_requirement_of_pyproject_is_pinned_within_its_range(
    lock: dict[str, Pin], requirements: list[str]
) -> None:
    for text in requirements:
        requirement = Requirement(text)
        pin = lock.get(canonicalize_name(requirement.name))
        assert pin is not None, f"{requirement.name} is not in the lock: run `make lock`"
        assert requirement.specifier.contains(pin.version, prereleases=True), (
            f"{requirement.name}=={pin.version} is outside {requirement.specifier}: run `make lock`"
        )


def test_the_lock_has_no_direct_dependency_that_pyproject_dropped() -> None:
    direct = {
        canonicalize_name(pin.name) for pin in CONTROLLER.values() if "llmkube (pyproject.toml)" in pin.via
    }
    wanted = {canonicalize_name(Requirement(text).name) for text in PYPROJECT["project"]["dependencies"]}
    assert direct == wanted, "run `make lock`"


def test_every_pin_has_hashes_and_every_dependency_a_source() -> None:
    for lock in (CONTROLLER, BUILD):
        assert lock
        for pin in lock.values():
            assert pin.hashes >= 1, pin
    for pin in CONTROLLER.values():
        # Each package is there because pyproject or another locked package needs it.
        assert pin.via, pin
        assert all(
            source == "llmkube (pyproject.toml)" or canonicalize_name(source) in CONTROLLER
            for source in pin.via
        ), pin


def test_the_image_stays_without_the_testing_extra() -> None:
    assert not NEVER_IN_THE_IMAGE & set(CONTROLLER)
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {canonicalize_name(Requirement(text).name) for text in extras["testing"]} == {
        "cryptography",
        "gguf",
    }


def test_the_dockerfile_installs_only_from_the_locks_with_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    installs = pip_installs(dockerfile)
    assert len(installs) == 3, installs
    locked = [i for i in installs if "--requirement" in i]
    assert sorted(re.search(r"--requirement (\S+)", i)[1] for i in locked) == [  # type: ignore[index]
        "requirements/build.txt",
        "requirements/controller.txt",
    ]
    assert all("--require-hashes" in i and "--only-binary=:all:" in i for i in locked)
    (project,) = [i for i in installs if "--requirement" not in i]
    # llmkube itself: the wheel built offline, nothing else fetched
    assert "--no-deps" in project and "--no-index" in project
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, re.M)
    assert base is not None and re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", base[1])
