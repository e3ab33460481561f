"""llama.cpp's `llama-server` as a process on this host, for tests that need a real OpenAI-compatible
streaming server without a cluster (`llmkube benchmark` against it).

The node tier builds the binary for its image (`localhost/llama-server:cpu`, hack/build-images.sh:
CPU backend, one binary linked only against the C/C++ runtime), so it runs on the machine that
built it: it is taken out of the image's OCI archive, once per image (the archive's `.inputs` hash
names the directory), into `<cache>/host/llama-server/<inputs>/llama-server`.
"""

import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from llmkube_testing.images import BUILD_COMMAND, LLAMA_SERVER, default_images_dir
from tools import without_build

BINARY_IN_IMAGE = "app/llama-server"


def _blob(archive: tarfile.TarFile, name: str) -> bytes:
    member = archive.extractfile(name)
    if member is None:
        raise FileNotFoundError(name)
    return member.read()


def _extract(archive_path: Path, target: Path) -> None:
    with tarfile.open(archive_path) as archive:
        index = json.loads(_blob(archive, "index.json"))
        digest = index["manifests"][0]["digest"].split(":", 1)[1]
        manifest = json.loads(_blob(archive, f"blobs/sha256/{digest}"))
        for layer in reversed(manifest["layers"]):  # a later layer's file wins
            data = _blob(archive, f"blobs/sha256/{layer['digest'].split(':', 1)[1]}")
            if layer["mediaType"].endswith("gzip"):
                data = gzip.decompress(data)
            with tarfile.open(fileobj=io.BytesIO(data)) as layer_tar:
                members = {m.name.lstrip("./"): m for m in layer_tar.getmembers()}
                member = members.get(BINARY_IN_IMAGE)
                source = layer_tar.extractfile(member) if member is not None and member.isfile() else None
                if source is None:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_suffix(".partial")
                with open(partial, "wb") as out:
                    shutil.copyfileobj(source, out)
                partial.chmod(0o755)
                os.replace(partial, target)
                return
    raise FileNotFoundError(f"{archive_path} has no {BINARY_IN_IMAGE}")


def llama_server_binary() -> Path:
    """The binary, extracted if not yet; the test is skipped (with the reason) where it cannot be."""
    images = default_images_dir()
    archive, inputs = images / LLAMA_SERVER.archive, images / f"{LLAMA_SERVER.archive}.inputs"
    if not archive.is_file() or not inputs.is_file():
        without_build(f"{archive} is not built ({BUILD_COMMAND} builds it)")
    target = images.parent / "host" / "llama-server" / inputs.read_text().strip() / "llama-server"
    if not os.access(target, os.X_OK):
        _extract(archive, target)
    check = subprocess.run([target, "--version"], capture_output=True, text=True, timeout=60, check=False)
    if check.returncode != 0:
        pytest.skip(f"{target} cannot run on this host: {check.stderr.strip()[-300:]}")
    return target


@dataclass(frozen=True)
class LlamaServer:
    url: str
    process: "subprocess.Popen[bytes]"
    log: Path

    def metrics(self) -> str:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as answer:
            text: str = answer.read().decode()
            return text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def llama_server(model: Path, log: Path, *, slots: int = 4, threads: int = 1) -> Iterator[LlamaServer]:
    """llama-server serving `model` on a free loopback port with --metrics, until it answers /health;
    stopped on exit."""
    port = _free_port()
    command = [
        str(llama_server_binary()),
        *("--model", str(model), "--host", "127.0.0.1", "--port", str(port)),
        *("--parallel", str(slots), "--threads", str(threads), "--ctx-size", str(512 * slots), "--metrics"),
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    server = LlamaServer(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (
                f"llama-server exited {process.returncode}: {log.read_text()[-2000:]}"
            )
            try:
                with urllib.request.urlopen(f"{server.url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (
                f"llama-server did not answer /health: {log.read_text()[-2000:]}"
            )
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
