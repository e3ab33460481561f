"""`make dist` (hack/dist.sh): the wheel, the sdist, the chart package and the controller image's
OCI archive in dist/, each in SHA256SUMS, which `sha256sum -c` accepts. The image step is `make
image`'s own (hack/image.sh, ARCHIVE=...): the node tier builds its controller image through it
(hack/build-images.sh), and that archive is what the image test below puts into dist/; a machine
without the node tier leaves the image out (DIST_IMAGE=none)."""

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from llmkube_testing.images import CONTROLLER, archive_refs, default_images_dir
from tools import ROOT, run, tool, tools_bin, without_build

from llmkube import __version__


def dist(directory: Path, image: str) -> dict[str, str]:
    tool("helm")
    run(
        "bash",
        ROOT / "hack" / "dist.sh",
        env={
            "DIST_DIR": str(directory),
            "DIST_IMAGE": image,
            "PYTHON": sys.executable,
            "LLMKUBE_TOOLS_BIN": str(tools_bin()),
        },
    )
    sums = {}
    for line in (directory / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        sums[name] = digest
    assert (
        subprocess.run(
            ["sha256sum", "--check", "--quiet", "SHA256SUMS"], cwd=directory, check=False
        ).returncode
        == 0
    )
    return sums


def test_dist_writes_the_packages_and_the_chart_with_their_sums(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    sums = dist(out, "none")
    wheel, sdist, chart = (
        f"llmkube-{__version__}-py3-none-any.whl",
        f"llmkube-{__version__}.tar.gz",
        f"llmkube-{__version__}.tgz",
    )
    assert sorted(sums) == sorted([wheel, sdist, chart])
    assert sorted(p.name for p in out.iterdir()) == sorted([*sums, "SHA256SUMS"])
    with zipfile.ZipFile(out / wheel) as package:
        names = package.namelist()
        entry_points = package.read(f"llmkube-{__version__}.dist-info/entry_points.txt").decode()
    assert "llmkube/cli.py" in names and "llmkube/_bundled/manifests/kustomization.yaml" in names
    assert "llmkube = llmkube.cli:main" in entry_points
    with tarfile.open(out / sdist) as source:
        assert f"llmkube-{__version__}/pyproject.toml" in source.getnames()
    with tarfile.open(out / chart) as packaged:
        top = "llmkube"  # helm package's directory: the chart's name
        member = packaged.extractfile(f"{top}/Chart.yaml")
        assert member is not None
        meta = yaml.safe_load(member.read())
        assert f"{top}/values.schema.json" in packaged.getnames()
    assert (meta["version"], meta["appVersion"]) == (__version__, __version__)


def test_dist_refuses_an_image_archive_that_is_not_there(tmp_path: Path) -> None:
    tool("helm")
    result = subprocess.run(
        ["bash", str(ROOT / "hack" / "dist.sh")],
        env={**os.environ, "DIST_DIR": str(tmp_path / "d"), "DIST_IMAGE": str(tmp_path / "nope.tar"),
             "PYTHON": sys.executable, "LLMKUBE_TOOLS_BIN": str(tools_bin())},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert f"DIST_IMAGE={tmp_path / 'nope.tar'}: no such archive" in result.stderr
    assert not (tmp_path / "d").exists()  # nothing half-written


@pytest.mark.node_prereqs
def test_dist_carries_the_image_make_image_built(tmp_path: Path) -> None:
    archive = default_images_dir() / CONTROLLER.archive
    if not archive.is_file():
        without_build(
            f"{archive} is missing (the node tier's controller image, built by `make node-prereqs`)"
        )
    sums = dist(tmp_path / "dist", str(archive))
    image = f"llmkube-image-{__version__}.oci.tar"
    assert image in sums
    assert f"localhost/llmkube:{__version__}" in archive_refs(tmp_path / "dist" / image)
