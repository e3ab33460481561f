"""The controller image carries the product and no test code: the archive the node tier imports
(built from the Dockerfile by hack/build-images.sh), read layer by layer."""

import json
import tarfile
from pathlib import Path
from typing import IO, Any

import pytest
from llmkube_testing.images import CONTROLLER, default_images_dir

SITE = "opt/llmkube/lib/python3.11/site-packages/"
#: the developer's commands, the test tooling as it used to live, and the test frameworks
TEST_PACKAGES = ("llmkube/devcli/", "llmkube/testing/", "tests/", "pytest", "_pytest", "hypothesis")


def _blob(archive: tarfile.TarFile, digest: str) -> IO[bytes]:
    algorithm, value = digest.split(":", 1)
    member = archive.extractfile(f"blobs/{algorithm}/{value}")
    assert member is not None, digest
    return member


def image_paths(path: Path) -> list[str]:
    """Every path of every layer of the archive's first image."""
    with tarfile.open(path) as archive:
        index: dict[str, Any] = json.load(_index(archive))
        manifest = json.load(_blob(archive, index["manifests"][0]["digest"]))
        paths: list[str] = []
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=_blob(archive, layer["digest"]), mode="r:*") as files:
                paths.extend(files.getnames())
    return paths


def _index(archive: tarfile.TarFile) -> IO[bytes]:
    member = archive.extractfile("index.json")
    assert member is not None
    return member


@pytest.fixture(scope="module")
def paths() -> list[str]:
    archive = default_images_dir() / CONTROLLER.archive
    assert archive.is_file(), f"{archive} is missing: make node-prereqs builds it"
    return image_paths(archive)


def test_the_image_carries_the_product(paths: list[str]) -> None:
    ours = {path.removeprefix(SITE) for path in paths if path.startswith(SITE + "llmkube/")}
    for needed in ("llmkube/cli.py", "llmkube/controllers/inferenceservice.py", "llmkube/router/proxy.py"):
        assert needed in ours, needed


def test_the_image_carries_no_test_code(paths: list[str]) -> None:
    test_code = [
        path
        for path in paths
        if "llmkube_testing" in path
        or path.startswith(tuple(SITE + name for name in TEST_PACKAGES))
        or (path.startswith(SITE + "llmkube/") and Path(path).name.startswith(("test_", "conftest")))
    ]
    assert test_code == []
