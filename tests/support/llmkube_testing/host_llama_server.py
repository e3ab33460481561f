"""llama.cpp's `llama-server` for this host, for the host agent's tests.

The node tier already builds it, for its image (`localhost/llama-server:cpu`, hack/build-images.sh:
the llama.cpp that the pinned llama-cpp-python sdist vendors, CPU backend, one self-contained
binary linked only against the C/C++ runtime). The same binary runs natively on the machine that
built it, so it is taken out of that image's OCI archive rather than compiled a second time:
`<cache>/host/llama-server/<inputs>/llama-server`, where `<inputs>` is the hash of the image's
inputs (hack/build-images.sh writes it beside the archive), so a rebuilt image is extracted anew and
an unchanged one never is.

    python -m llmkube_testing.host_llama_server      # extract (idempotent); prints the path
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from llmkube_testing.images import LLAMA_SERVER, default_images_dir

BINARY_IN_IMAGE = "app/llama-server"


def cache_root() -> Path:
    return default_images_dir().parent


def extracted_path(images_dir: Path | None = None) -> Path | None:
    """Where the binary of the current image lives once extracted (None: no image built yet)."""
    images = images_dir or default_images_dir()
    inputs = images / f"{LLAMA_SERVER.archive}.inputs"
    if not inputs.is_file():
        return None
    return cache_root() / "host" / "llama-server" / inputs.read_text().strip() / "llama-server"


def _blob(archive: tarfile.TarFile, digest: str) -> bytes:
    member = archive.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
    if member is None:
        raise FileNotFoundError(digest)
    return member.read()


def extract(images_dir: Path | None = None) -> Path:
    """The binary, extracted from the image archive if not yet. Raises FileNotFoundError when the
    image has not been built (`make node-prereqs`)."""
    images = images_dir or default_images_dir()
    target = extracted_path(images)
    archive_path = images / LLAMA_SERVER.archive
    if target is None or not archive_path.is_file():
        raise FileNotFoundError(f"{archive_path} is not built yet (make node-prereqs builds it)")
    if os.access(target, os.X_OK):
        return target
    with tarfile.open(archive_path) as archive:
        index = json.loads(_blob_or_file(archive, "index.json"))
        manifest = json.loads(_blob(archive, index["manifests"][0]["digest"]))
        # The last layer that has the file wins (a later layer replaces an earlier one's file).
        for layer in reversed(manifest["layers"]):
            data = _blob(archive, layer["digest"])
            if layer["mediaType"].endswith("gzip"):
                data = gzip.decompress(data)
            with tarfile.open(fileobj=io.BytesIO(data)) as layer_tar:
                names = {m.name.lstrip("./"): m for m in layer_tar.getmembers()}
                member = names.get(BINARY_IN_IMAGE)
                if member is None or not member.isfile():
                    continue
                source = layer_tar.extractfile(member)
                assert source is not None
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_suffix(".partial")
                with open(partial, "wb") as out:
                    shutil.copyfileobj(source, out)
                partial.chmod(0o755)
                os.replace(partial, target)
                return target
    raise FileNotFoundError(f"{archive_path} has no {BINARY_IN_IMAGE}")


def _blob_or_file(archive: tarfile.TarFile, name: str) -> bytes:
    member = archive.extractfile(name)
    if member is None:
        raise FileNotFoundError(name)
    return member.read()


def runnable(path: Path) -> str | None:
    """Why the extracted binary cannot run on this host (missing libraries, another OS), or None."""
    try:
        result = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as error:
        return f"{path} cannot run here: {error}"
    if result.returncode != 0:
        return f"{path} --version failed ({result.returncode}): {result.stderr.strip()[-300:]}"
    return None


def main() -> int:
    try:
        path = extract()
    except FileNotFoundError as missing:
        print(f"[host-llama-server] {missing}", file=sys.stderr)
        return 1
    if reason := runnable(path):
        print(f"[host-llama-server] {reason}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
