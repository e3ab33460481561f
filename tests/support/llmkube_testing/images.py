"""The locally built images the node tier imports into its containerd (built by hack/build-images.sh;
no registry is reachable, so nothing is ever pulled)."""

import io
import json
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube_testing import CHECKOUT

BUILD_COMMAND = "make node-prereqs"


@dataclass(frozen=True)
class LocalImage:
    archive: str  # file name of its OCI archive
    ref: str

    @property
    def repository(self) -> str:
        return self.ref.rsplit(":", 1)[0]


PAUSE = LocalImage("llmkube-pause.tar", "localhost/llmkube-pause:local")
CONTROLLER = LocalImage("llmkube.tar", "localhost/llmkube:dev")
CURL = LocalImage("llmkube-curl.tar", "localhost/llmkube-curl:local")
LLAMA_SERVER = LocalImage("llama-server.tar", "localhost/llama-server:cpu")
NODE_IMAGES = (PAUSE, CONTROLLER, CURL, LLAMA_SERVER)

# The controller's default model-downloader image, as the node knows it: the local curl image
# stands in for it, so the manifests' controller needs no flag to run on the node tier.
IMAGE_ALIASES = {OperatorConfig().init_container_image: CURL}


def default_images_dir() -> Path:
    if explicit := os.environ.get("LLMKUBE_IMAGES_DIR"):
        return Path(explicit)
    cache = os.environ.get("LLMKUBE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "llmkube"
    )
    return Path(cache) / "images"


def missing_images(images_dir: Path) -> list[str]:
    return [image.archive for image in NODE_IMAGES if not (images_dir / image.archive).is_file()]


def archive_refs(path: Path) -> list[str]:
    """The image names recorded in an OCI archive's index (`org.opencontainers.image.ref.name`)."""
    with tarfile.open(path) as archive:
        member = archive.extractfile("index.json")
        index = json.load(io.TextIOWrapper(member)) if member else {}
    return [
        ref
        for manifest in index.get("manifests", [])
        if (ref := (manifest.get("annotations") or {}).get("org.opencontainers.image.ref.name"))
    ]


BUILD_SCRIPT = CHECKOUT / "hack" / "build-images.sh"


def refresh_controller_image(images_dir: Path) -> None:
    """Rebuild the controller's archive when the sources changed since it was made (the build
    script keys it on them and answers `cached` in a fraction of a second otherwise). `make test`
    runs the build first; a node-tier pytest run on its own imported whatever archive was there,
    a controller older than the tree it was meant to test."""
    if not BUILD_SCRIPT.is_file():
        return  # an installed package: no sources to build from, the archives are what they are
    subprocess.run(
        ["bash", str(BUILD_SCRIPT), "controller"],
        env={**os.environ, "LLMKUBE_IMAGES_DIR": str(images_dir)},
        stdout=subprocess.DEVNULL,
        check=True,
        timeout=1800,
    )
