"""Size of the controller image, read from the OCI archive hack/build-images.sh writes.

Reports the compressed size (what a node pulls), the unpacked size (what it stores), the layer the
Dockerfile adds on top of its base image, and the installed distributions of the venv by size, so a
dependency's cost in the image is a figure, not a guess.

Usage: .venv/bin/python bench/bench_image_size.py [ARCHIVE] [--base BASE_ARCHIVE] [--top 15]
(default ARCHIVE: llmkube.tar in hack/build-images.sh's output directory). Prints one JSON object.
"""

import argparse
import gzip
import json
import re
import tarfile
from collections import defaultdict
from pathlib import Path
from typing import IO, Any, cast

from llmkube_testing.images import CONTROLLER, default_images_dir

SITE_PACKAGES = re.compile(r"^opt/llmkube/lib/python3\.\d+/site-packages/([^/]+)")
MB = 1_000_000


def _blob(archive: tarfile.TarFile, digest: str) -> IO[bytes]:
    algorithm, value = digest.split(":", 1)
    member = archive.extractfile(f"blobs/{algorithm}/{value}")
    if member is None:
        raise FileNotFoundError(digest)
    return member


def _json_blob(archive: tarfile.TarFile, digest: str) -> Any:
    return json.load(_blob(archive, digest))


def layers(path: Path) -> list[dict[str, Any]]:
    """Each layer of the archive's (only) image: digest, compressed size, and its files."""
    with tarfile.open(path) as archive:
        index = json.load(cast(IO[bytes], archive.extractfile("index.json")))
        manifest = _json_blob(archive, index["manifests"][0]["digest"])
        result = []
        for layer in manifest["layers"]:
            blob = _blob(archive, layer["digest"])
            stream: IO[bytes] = gzip.GzipFile(fileobj=blob) if "gzip" in layer["mediaType"] else blob
            files: dict[str, int] = {}
            with tarfile.open(fileobj=stream, mode="r|") as content:
                for member in content:
                    if member.isfile():
                        files[member.name.lstrip("./")] = member.size
            result.append({"digest": layer["digest"], "compressed": layer["size"], "files": files})
        return result


def distributions(files: dict[str, int]) -> dict[str, int]:
    """Bytes per top-level entry of the venv's site-packages, `.dist-info` folded into its package."""
    sizes: dict[str, int] = defaultdict(int)
    for name, size in files.items():
        match = SITE_PACKAGES.match(name)
        if match:
            top = match.group(1)
            top = re.sub(r"-[^-]+\.(dist-info|data)$", "", top).lower().replace("-", "_")
            sizes[top.removesuffix(".py").removesuffix(".libs")] += size
    return dict(sizes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("archive", nargs="?", type=Path, default=default_images_dir() / CONTROLLER.archive)
    parser.add_argument("--base", type=Path, help="the base image's archive: its layers are not ours")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    image = layers(args.archive)
    base_digests = {layer["digest"] for layer in layers(args.base)} if args.base else set()
    ours = [layer for layer in image if layer["digest"] not in base_digests]
    venv: dict[str, int] = {}
    for layer in ours:
        venv.update({name: size for name, size in layer["files"].items() if name.startswith("opt/llmkube/")})
    by_distribution = sorted(distributions(venv).items(), key=lambda item: -item[1])
    print(
        json.dumps(
            {
                "archive": str(args.archive),
                "compressed_mb": round(sum(layer["compressed"] for layer in image) / MB, 1),
                "unpacked_mb": round(sum(sum(layer["files"].values()) for layer in image) / MB, 1),
                "layers": len(image),
                "added_layers_compressed_mb": round(sum(layer["compressed"] for layer in ours) / MB, 1)
                if args.base
                else None,
                "venv_mb": round(sum(venv.values()) / MB, 1),
                "venv_top": {name: round(size / MB, 2) for name, size in by_distribution[: args.top]},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
