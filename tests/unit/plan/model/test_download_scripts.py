"""The model downloader's script, run for real with `sh` and `curl` against an HTTP server on
loopback that answers like the hubs and object stores models come from (ranges, ETags, the
Hub's X-Linked-Etag, S3's XML errors).

The script is data the planner emits; these tests prove the data does what plan/model/
download_scripts.py says: every file staged once, cache hits without a request, ETags for
OnChange, offline tolerance, resumed downloads, SHA-256 checks, the server's own words on a
refusal, exit codes a Job can act on, no partial file ever under a file's name, none left after
a success.
"""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from llmkube.plan.model.download_scripts import (
    DOWNLOAD_REMOTE,
    EXIT_PERMANENT,
    EXIT_TRANSIENT,
    LOCAL_COPY,
    downloader_script,
)

pytestmark = pytest.mark.skipif(
    shutil.which("sh") is None or shutil.which("curl") is None, reason="needs sh and curl"
)
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass
class Blob:
    body: bytes
    etag: str
    linked_sha256: bool = False  # answer X-Linked-Etag with the body's SHA-256, as the Hub does for LFS files


@dataclass
class Upstream:
    files: dict[str, Blob] = field(default_factory=dict)
    base: str = ""
    requests: list[tuple[str, str, str | None, str | None]] = field(
        default_factory=list
    )  # method, path, Range, auth
    chunk_delay: float = 0.0  # seconds between 4 KiB chunks of a body (a slow download)
    refuse: tuple[int, bytes, dict[str, str]] | None = None  # status, body, headers for every request
    ignore_ranges: bool = False

    def put(self, name: str, body: bytes, etag: str | None = None, *, linked: bool = False) -> None:
        self.files[name] = Blob(body, etag or f'"{hashlib.md5(body).hexdigest()}"', linked)

    def ranges(self, name: str) -> list[str | None]:
        return [r for method, path, r, _ in self.requests if path == f"/{name}" and method == "GET"]


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    state = Upstream()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve(body=True)

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def _serve(self, *, body: bool) -> None:
            state.requests.append(
                (self.command, self.path, self.headers.get("Range"), self.headers.get("Authorization"))
            )
            if state.refuse is not None:
                status, text, headers = state.refuse
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
                return
            blob = state.files.get(self.path.lstrip("/"))
            if blob is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            size, start, end, status = len(blob.body), 0, len(blob.body) - 1, 200
            wanted = _RANGE.match(self.headers.get("Range") or "")
            if wanted and not state.ignore_ranges:
                start = int(wanted[1])
                end = min(int(wanted[2]), size - 1) if wanted[2] else size - 1
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            self.send_response(status)
            self.send_header("ETag", blob.etag)
            if blob.linked_sha256:
                self.send_header("X-Linked-Etag", f'"{hashlib.sha256(blob.body).hexdigest()}"')
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(end - start + 1))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            if not body:
                return
            try:
                for at in range(start, end + 1, 4096):
                    self.wfile.write(blob.body[at : min(at + 4096, end + 1)])
                    self.wfile.flush()
                    if state.chunk_delay:
                        time.sleep(state.chunk_delay)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def files_value(upstream: Upstream, *names: str, dests: tuple[str, ...] = ()) -> str:
    return "\n".join(f"{dests[i] if dests else name}\t{upstream.base}/{name}" for i, name in enumerate(names))


def environment(cache: Path, files: str, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DOWNLOAD_KIND": "http",
        "MODEL_SOURCE": "the-source",
        "CACHE_DIR": str(cache),
        "MODEL_FILES": files,
        **extra,
    }


def run(
    env: dict[str, str], script: str = DOWNLOAD_REMOTE, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=timeout)


def lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith("llmkube-download: ")]


def visible(cache: Path) -> list[str]:
    """Files a runtime would see: everything but the hidden bookkeeping (ETags, the lock)."""
    return sorted(
        str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")
    )


def test_stages_every_file_once_then_every_file_is_a_cache_hit_without_a_request(
    upstream: Upstream, tmp_path: Path
) -> None:
    upstream.put("m-00001-of-00002.gguf", os.urandom(300_000))
    upstream.put("m-00002-of-00002.gguf", os.urandom(100_000))
    upstream.put("sub/mmproj.gguf", b"projector")
    cache = tmp_path / "key"
    env = environment(
        cache, files_value(upstream, "m-00001-of-00002.gguf", "m-00002-of-00002.gguf", "sub/mmproj.gguf")
    )
    result = run(env)
    assert result.returncode == 0, result.stdout + result.stderr
    for name, blob in upstream.files.items():
        assert (cache / name).read_bytes() == blob.body
    assert visible(cache) == ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf", "sub/mmproj.gguf"]
    assert lines(result)[-1] == (
        f"llmkube-download: done: 3 files, 400009 bytes in {cache} (3 downloaded, 0 cache hits)"
    )
    before = len(upstream.requests)
    again = run(env)
    assert again.returncode == 0
    assert len(upstream.requests) == before  # IfNotPresent: nothing asked of the source
    assert f"llmkube-download: cache hit: all 3 files are in {cache}" in lines(again)
    assert lines(again)[-1].endswith("(0 downloaded, 3 cache hits)")


def test_a_missing_file_of_several_is_fetched_alone(upstream: Upstream, tmp_path: Path) -> None:
    upstream.put("a.gguf", b"A" * 5000)
    upstream.put("b.gguf", b"B" * 7000)
    cache = tmp_path / "key"
    env = environment(cache, files_value(upstream, "a.gguf", "b.gguf"))
    assert run(env).returncode == 0
    (cache / "b.gguf").unlink()
    upstream.requests.clear()
    result = run(env)
    assert result.returncode == 0
    assert {path for _, path, _, _ in upstream.requests} == {"/b.gguf"}
    assert "llmkube-download: cache hit: a.gguf" in lines(result)
    assert (cache / "b.gguf").read_bytes() == b"B" * 7000


def test_on_change_fetches_only_the_files_whose_etag_changed(upstream: Upstream, tmp_path: Path) -> None:
    upstream.put("a.gguf", b"a-v1", '"a1"')
    upstream.put("b.gguf", b"b-v1", '"b1"')
    cache = tmp_path / "key"
    env = environment(cache, files_value(upstream, "a.gguf", "b.gguf"), ON_CHANGE="1")
    assert run(env).returncode == 0
    assert (cache / ".a.gguf.etag").read_text().strip() == '"a1"'
    upstream.put("b.gguf", b"b-v2", '"b2"')
    upstream.requests.clear()
    result = run(env)
    assert result.returncode == 0, result.stdout
    assert "llmkube-download: cache hit: a.gguf (unchanged upstream)" in lines(result)
    assert (cache / "a.gguf").read_bytes() == b"a-v1" and (cache / "b.gguf").read_bytes() == b"b-v2"
    assert [r for _, path, r, _ in upstream.requests if path == "/a.gguf"] == [
        "bytes=0-0"
    ]  # asked, not fetched
    assert (cache / ".b.gguf.etag").read_text().strip() == '"b2"'


def test_on_change_keeps_cached_copies_when_the_source_is_unreachable_and_fails_without_them(
    upstream: Upstream, tmp_path: Path
) -> None:
    upstream.put("a.gguf", b"a-v1")
    cache = tmp_path / "key"
    unreachable = environment(cache, "a.gguf\thttp://127.0.0.1:9/a.gguf", ON_CHANGE="1")
    result = run(unreachable)
    assert result.returncode == EXIT_TRANSIENT and not (cache / "a.gguf").exists()
    assert "no answer" in lines(result)[-1]
    assert run(environment(cache, files_value(upstream, "a.gguf"), ON_CHANGE="1")).returncode == 0
    result = run(unreachable)
    assert result.returncode == 0 and "keeping the cached copy" in result.stdout
    assert (cache / "a.gguf").read_bytes() == b"a-v1"


def test_a_download_killed_midway_resumes_and_leaves_no_part_file(upstream: Upstream, tmp_path: Path) -> None:
    body = os.urandom(400 * 4096)
    upstream.put("big.gguf", body)
    upstream.chunk_delay = 0.01
    cache = tmp_path / "key"
    env = environment(cache, files_value(upstream, "big.gguf"))
    process = subprocess.Popen(
        ["sh", "-c", DOWNLOAD_REMOTE],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    parts: list[Path] = []
    while time.monotonic() < deadline:
        parts = list(cache.glob("big.gguf.*.part"))
        if parts and parts[0].stat().st_size > 100 * 4096:
            break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the pod dies: sh, curl and all
    process.wait()
    assert parts and not (cache / "big.gguf").exists()  # never a partial file under the file's name
    partial = parts[0].stat().st_size
    upstream.chunk_delay = 0
    upstream.requests.clear()
    result = run(env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (cache / "big.gguf").read_bytes() == body
    resumed_at = [r for r in upstream.ranges("big.gguf") if r != "bytes=0-0"]
    assert resumed_at and int(resumed_at[0].removeprefix("bytes=").rstrip("-")) >= partial
    assert "resuming big.gguf" in result.stdout
    assert not list(cache.rglob("*.part"))


def test_a_part_file_of_another_upstream_version_is_not_resumed(upstream: Upstream, tmp_path: Path) -> None:
    upstream.put("m.gguf", b"new-bytes" * 1000, '"v2"')
    cache = tmp_path / "key"
    cache.mkdir()
    stale = cache / "m.gguf.0123456789ab.part"  # left by a download of an older ETag
    stale.write_bytes(b"old-bytes" * 500)
    stray = cache / "gone.gguf.abcdefabcdef.part"  # of a file no longer listed
    stray.write_bytes(b"x")
    result = run(environment(cache, files_value(upstream, "m.gguf")))
    assert result.returncode == 0
    assert (cache / "m.gguf").read_bytes() == b"new-bytes" * 1000
    assert not list(cache.rglob("*.part"))


def test_the_model_file_is_checked_against_spec_sha256(upstream: Upstream, tmp_path: Path) -> None:
    upstream.put("m.gguf", b"model bytes")
    cache = tmp_path / "key"
    files = files_value(upstream, "m.gguf")
    wrong = run(environment(cache, files, MODEL_SHA256="0" * 64))
    assert wrong.returncode == EXIT_PERMANENT
    assert f"has SHA-256 {hashlib.sha256(b'model bytes').hexdigest()}, not {'0' * 64}" in lines(wrong)[-1]
    assert not (cache / "m.gguf").exists() and not list(cache.rglob("*.part"))
    right = run(environment(cache, files, MODEL_SHA256=hashlib.sha256(b"model bytes").hexdigest()))
    assert right.returncode == 0 and (cache / "m.gguf").read_bytes() == b"model bytes"


def test_a_file_whose_linked_etag_is_its_sha256_is_accepted(upstream: Upstream, tmp_path: Path) -> None:
    upstream.put("shard.gguf", b"shard one", linked=True)
    cache = tmp_path / "key"
    result = run(environment(cache, files_value(upstream, "shard.gguf")))
    assert result.returncode == 0 and (cache / "shard.gguf").read_bytes() == b"shard one"


def test_a_file_that_does_not_match_the_announced_sha256_is_refused(tmp_path: Path) -> None:
    body, announced = b"what arrives", hashlib.sha256(b"what was announced").hexdigest()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            wanted = _RANGE.match(self.headers.get("Range") or "")
            start, end = (int(wanted[1]), int(wanted[2] or len(body) - 1)) if wanted else (0, len(body) - 1)
            end = min(end, len(body) - 1)
            self.send_response(206 if wanted else 200)
            self.send_header("X-Linked-Etag", f'"{announced}"')
            self.send_header("ETag", '"e"')
            self.send_header("Content-Length", str(end - start + 1))
            if wanted:
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
            self.end_headers()
            self.wfile.write(body[start : end + 1])

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cache = tmp_path / "key"
        url = f"http://127.0.0.1:{server.server_address[1]}/m.gguf"
        result = run(environment(cache, f"m.gguf\t{url}"))
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == EXIT_PERMANENT
    assert f"not {announced}" in lines(result)[-1]
    assert not (cache / "m.gguf").exists() and not list(cache.rglob("*.part"))


@pytest.mark.parametrize(
    ("status", "body", "headers", "words", "code"),
    [
        (
            403,
            b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidAccessKeyId</Code>'
            b"<Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>",
            {"Content-Type": "application/xml"},
            "HTTP 403 InvalidAccessKeyId: The AWS Access Key Id you provided does not exist in our records.",
            EXIT_PERMANENT,
        ),
        (
            # XML's escapes are the words' own characters again (MinIO escapes quotes as &#39;).
            400,
            b"<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region is wrong;"
            b" expecting &#39;eu-central-1&#39; &amp; not &quot;us&quot; &lt;sic&gt;</Message></Error>",
            {"Content-Type": "application/xml"},
            "HTTP 400 AuthorizationHeaderMalformed: the region is wrong;"
            " expecting 'eu-central-1' & not \"us\" <sic>",
            EXIT_PERMANENT,
        ),
        (
            401,
            b'{"error":"Invalid credentials in Authorization header"}',
            {"X-Error-Code": "GatedRepo", "Content-Type": "application/json"},
            "HTTP 401 GatedRepo: Invalid credentials in Authorization header",
            EXIT_PERMANENT,
        ),
        (404, b"", {}, "HTTP 404", EXIT_PERMANENT),
        (503, b"busy", {"Retry-After": "0"}, "HTTP 503", EXIT_TRANSIENT),
    ],
)
def test_a_refusal_is_reported_in_the_servers_own_words_with_an_exit_code_a_job_can_act_on(
    upstream: Upstream,
    tmp_path: Path,
    status: int,
    body: bytes,
    headers: dict[str, str],
    words: str,
    code: int,
) -> None:
    upstream.refuse = (status, body, headers)
    cache = tmp_path / "key"
    termination = tmp_path / "termination-log"
    termination.write_text("")
    result = run(environment(cache, files_value(upstream, "m.gguf"), TERMINATION_LOG=str(termination)))
    assert result.returncode == code
    assert lines(result)[-1] == f"llmkube-download: failed: m.gguf from the-source: {words}"
    assert termination.read_text() == lines(result)[-1] + "\n"  # the container's status message
    assert not (cache / "m.gguf").exists()


def test_credentials_reach_curl_on_its_input_never_its_command_line(
    upstream: Upstream, tmp_path: Path
) -> None:
    upstream.put("m.gguf", b"private")
    cache = tmp_path / "key"
    env = environment(cache, files_value(upstream, "m.gguf"), DOWNLOAD_KIND="hf", HF_TOKEN='hf_se"cret\\x')
    seen: list[str] = []
    upstream.chunk_delay = 0.0
    result = run(env)
    assert result.returncode == 0
    assert {auth for _, _, _, auth in upstream.requests} == {'Bearer hf_se"cret\\x'}
    seen.extend(result.stdout.splitlines())
    assert not any("hf_se" in line for line in seen)
    assert "HF_TOKEN" in DOWNLOAD_REMOTE and "-K -" in DOWNLOAD_REMOTE


def test_s3_requests_are_signed_and_sent_to_the_secrets_endpoint(upstream: Upstream, tmp_path: Path) -> None:
    upstream.put("bucket/models/m.gguf", b"object")
    cache = tmp_path / "key"
    env = environment(
        cache,
        "m.gguf\t/bucket/models/m.gguf",
        DOWNLOAD_KIND="s3",
        AWS_ENDPOINT_URL=upstream.base + "/",
        AWS_ACCESS_KEY_ID="AKIDEXAMPLE",
        AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        AWS_REGION="eu-west-3",
    )
    result = run(env)
    assert result.returncode == 0, result.stdout
    assert (cache / "m.gguf").read_bytes() == b"object"
    auth = upstream.requests[0][3] or ""
    assert (
        auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") and "/eu-west-3/s3/aws4_request" in auth
    )


def test_a_slow_download_prints_readable_progress_lines(upstream: Upstream, tmp_path: Path) -> None:
    """`kubectl logs` of the downloader shows one line per few seconds, never curl's redrawn meter
    (carriage returns); the controller reads the same lines into status."""
    upstream.put("slow.gguf", b"G" * 24 * 1024)
    upstream.chunk_delay = 1.2  # ~7 s in all
    result = run(environment(tmp_path / "key", files_value(upstream, "slow.gguf")))
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stdout + result.stderr
    progress = [
        line for line in lines(result) if re.match(r"llmkube-download: \d+ of \d+ bytes \(\d+%\)$", line)
    ]
    assert progress, result.stdout
    got = int(progress[0].split()[1])
    assert progress[0] == f"llmkube-download: {got} of {24 * 1024} bytes ({got * 100 // (24 * 1024)}%)"
    assert f"llmkube-download: {24 * 1024} of {24 * 1024} bytes (slow.gguf done)" in lines(result)


def test_a_server_that_ignores_ranges_is_downloaded_whole(upstream: Upstream, tmp_path: Path) -> None:
    upstream.put("m.gguf", os.urandom(3 * 1024 * 1024))  # beyond what the first request reads
    upstream.ignore_ranges = True
    cache = tmp_path / "key"
    result = run(environment(cache, files_value(upstream, "m.gguf")))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (cache / "m.gguf").read_bytes() == upstream.files["m.gguf"].body


def test_hostile_values_are_only_ever_data(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    cache = tmp_path / "key"
    for files in (f"m.gguf\thttp://127.0.0.1:9/$(touch {marker})", f"$(touch {marker})\t-K/etc/passwd"):
        run(environment(cache, files, MODEL_SOURCE=f"$(touch {marker})"))
    run(environment(cache, "m.gguf\tfile:///etc/passwd"))
    assert not marker.exists()
    assert not (cache / "m.gguf").exists()  # file:// is not a protocol the downloader speaks


@pytest.mark.parametrize(("local", "ca"), [(False, False), (True, False), (False, True), (True, True)])
def test_downloader_script_variants(local: bool, ca: bool) -> None:
    script = downloader_script(local_source=local, custom_ca=ca)
    assert script.startswith("for f in /custom-certs/*") is ca
    assert script.endswith(LOCAL_COPY if local else DOWNLOAD_REMOTE)
