"""The downloader scripts, run for real with `sh` and `curl` against a local HTTP server.

The scripts are data the planner emits; these tests prove that data does what it should: download
once, keep a cached file, conditional GET with ETags for OnChange, offline tolerance, no partial
files left behind.
"""

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from llmkube.plan.inferenceservice.init_scripts import (
    DOWNLOAD_IF_MISSING,
    DOWNLOAD_ON_CHANGE,
    downloader_script,
)

pytestmark = pytest.mark.skipif(
    shutil.which("sh") is None or shutil.which("curl") is None, reason="needs sh and curl"
)


@dataclass
class Upstream:
    body: bytes = b"GGUF-v1"
    etag: str = '"v1"'
    requests: list[str | None] = field(default_factory=list)  # If-None-Match of each request
    url: str = ""
    chunk_delay: float = 0.0  # seconds between 1 KiB chunks of the body (a slow download)


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    state = Upstream()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.headers.get("If-None-Match"))
            if self.headers.get("If-None-Match") == state.etag:
                self.send_response(304)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("ETag", state.etag)
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            for start in range(0, len(state.body), 1024):
                self.wfile.write(state.body[start : start + 1024])
                self.wfile.flush()
                time.sleep(state.chunk_delay)

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("ETag", state.etag)
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/model.gguf"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def run(
    script: str, source: str, cache_dir: Path | str, model_path: Path
) -> subprocess.CompletedProcess[str]:
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "MODEL_SOURCE": source,
        "CACHE_DIR": str(cache_dir),
        "MODEL_PATH": str(model_path),
    }
    return subprocess.run(["sh", "-c", script], env=environment, capture_output=True, text=True, timeout=30)


def test_if_missing_downloads_once_then_keeps_the_cached_file(upstream: Upstream, tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "key"
    target = cache / "tiny.gguf"
    assert run(DOWNLOAD_IF_MISSING, upstream.url, cache, target).returncode == 0
    assert target.read_bytes() == b"GGUF-v1"
    upstream.body = b"GGUF-v2"
    assert run(DOWNLOAD_IF_MISSING, upstream.url, cache, target).returncode == 0
    assert target.read_bytes() == b"GGUF-v1"
    assert len(upstream.requests) == 1
    assert not Path(f"{target}.part").exists()


def test_if_missing_fails_on_http_error_and_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / "tiny.gguf"
    result = run(DOWNLOAD_IF_MISSING, "http://127.0.0.1:9/nothing", "", target)
    assert result.returncode != 0
    assert not target.exists()


def test_on_change_conditional_get(upstream: Upstream, tmp_path: Path) -> None:
    cache = tmp_path / "key"
    target = cache / "tiny.gguf"
    etag_file = cache / ".tiny.gguf.etag"
    assert run(DOWNLOAD_ON_CHANGE, upstream.url, cache, target).returncode == 0
    assert target.read_bytes() == b"GGUF-v1" and etag_file.read_text().strip() == '"v1"'
    # Unchanged upstream: a conditional request, answered 304, the file is kept.
    result = run(DOWNLOAD_ON_CHANGE, upstream.url, cache, target)
    assert result.returncode == 0 and "unchanged" in result.stdout
    assert upstream.requests[-1] == '"v1"' and target.read_bytes() == b"GGUF-v1"
    # Changed upstream: 200, the file and the saved ETag are replaced.
    upstream.body, upstream.etag = b"GGUF-v2", '"v2"'
    assert run(DOWNLOAD_ON_CHANGE, upstream.url, cache, target).returncode == 0
    assert target.read_bytes() == b"GGUF-v2" and etag_file.read_text().strip() == '"v2"'
    assert sorted(p.name for p in cache.iterdir()) == [".tiny.gguf.etag", "tiny.gguf"]  # no .part left


def test_on_change_is_offline_tolerant_only_with_a_cached_copy(upstream: Upstream, tmp_path: Path) -> None:
    target = tmp_path / "tiny.gguf"
    unreachable = "http://127.0.0.1:9/model.gguf"
    result = run(DOWNLOAD_ON_CHANGE, unreachable, "", target)
    assert result.returncode == 1 and not target.exists()
    assert run(DOWNLOAD_ON_CHANGE, upstream.url, "", target).returncode == 0
    result = run(DOWNLOAD_ON_CHANGE, unreachable, "", target)
    assert result.returncode == 0 and "cached copy" in result.stdout
    assert target.read_bytes() == b"GGUF-v1"


def test_on_change_without_saved_etag_downloads_unconditionally(upstream: Upstream, tmp_path: Path) -> None:
    target = tmp_path / "tiny.gguf"
    target.write_bytes(b"old")
    assert run(DOWNLOAD_ON_CHANGE, upstream.url, "", target).returncode == 0
    assert upstream.requests == [None] and target.read_bytes() == b"GGUF-v1"


@pytest.mark.parametrize("script", [DOWNLOAD_IF_MISSING, DOWNLOAD_ON_CHANGE], ids=["if-missing", "on-change"])
def test_a_slow_download_prints_readable_progress_lines(
    upstream: Upstream, tmp_path: Path, script: str
) -> None:
    """`kubectl logs` of the downloader shows one line per few seconds, never curl's redrawn meter
    (carriage returns); the controller reads the same lines into status."""
    upstream.body = b"G" * 12 * 1024
    upstream.chunk_delay = 0.6  # ~7 s in all
    result = run(script, upstream.url, "", tmp_path / "slow.gguf")
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("llmkube-download: ")]
    assert lines and lines[0].endswith(
        f"of {12 * 1024} bytes ({int(lines[0].split()[1]) * 100 // (12 * 1024)}%)"
    )
    if script is DOWNLOAD_IF_MISSING:
        assert lines[-1] == f"llmkube-download: {12 * 1024} of {12 * 1024} bytes (done)"
    assert (tmp_path / "slow.gguf").read_bytes() == upstream.body


def test_a_hostile_source_is_only_ever_a_url(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    source = f"http://127.0.0.1:9/$(touch {marker})"
    for script in (DOWNLOAD_IF_MISSING, DOWNLOAD_ON_CHANGE):
        run(script, source, "", tmp_path / "m.gguf")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("local", "on_change", "ca", "expected_start"),
    [
        (False, False, False, "set -eu"),
        (False, True, False, "set -u"),
        (True, False, False, "set -eu"),
        (False, False, True, "for f in /custom-certs/*"),
    ],
)
def test_downloader_script_variants(local: bool, on_change: bool, ca: bool, expected_start: str) -> None:
    script = downloader_script(local_source=local, on_change=on_change, custom_ca=ca)
    assert script.startswith(expected_start)
    assert ("cp /host-model/model.gguf" in script) is local
    assert ("--etag-compare" in script) is (on_change and not local)
