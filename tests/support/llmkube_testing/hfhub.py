"""A Hugging Face Hub stand-in on loopback that speaks the Hub's file API as the real Hub does,
for `HF_ENDPOINT` (the downloader) and `--hf-endpoint` (the controller) in tests.

What the huggingface_hub client and our downloader rely on, answered the Hub's way:

* `GET /api/models/{repo}/revision/{revision}`: the repository at a revision (`id`, `sha` the
  commit, `private`, `siblings` with each `rfilename`);
* `HEAD|GET /{repo}/resolve/{revision}/{path}`: a small (git) file is answered in place, with its
  git blob id as `ETag`; a large (LFS) file is a `302` to the storage host, whose answer carries
  the file's SHA-256 as `X-Linked-Etag` and its size as `X-Linked-Size`; both carry the commit as
  `X-Repo-Commit`. The revision is a branch (`main`), a commit, or a ref URL-encoded as one path
  segment (`refs%2Fpr%2F1`);
* the storage host (`/lfs/{sha256}` here, on the same server) honours `Range` (`206` with
  `Content-Range`, `416` beyond the end) and answers an `ETag`;
* a private repository without a valid `Authorization: Bearer <token>` is a `401` with
  `X-Error-Code: RepoNotFound` (the Hub does not tell strangers a private repository exists),
  an unknown repository, revision or file a `404` with `X-Error-Code` `RepoNotFound`,
  `RevisionNotFound` or `EntryNotFound` and a JSON `{"error": ...}` body.

Every request is recorded (method, path, Range, whether a token came) for the tests' assertions.
"""

import hashlib
import json
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

#: Files at least this large are stored in LFS (the Hub's threshold is 10 MiB; tests use a small one).
DEFAULT_LFS_THRESHOLD = 1024
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
_CHUNK = 64 * 1024


def git_blob_id(body: bytes) -> str:
    """The id git gives a file's contents (what the Hub answers as a small file's ETag)."""
    return hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()


@dataclass
class HubRepo:
    files: dict[str, bytes] = field(default_factory=dict)
    private: bool = False
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    branches: tuple[str, ...] = ("main",)


@dataclass(frozen=True)
class HubRequest:
    method: str
    path: str
    range: str | None
    authorized: bool


@dataclass
class HubState:
    repos: dict[str, HubRepo] = field(default_factory=dict)
    tokens: frozenset[str] = frozenset({"hf_test_token"})
    lfs_threshold: int = DEFAULT_LFS_THRESHOLD
    requests: list[HubRequest] = field(default_factory=list)
    base: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, repo: str, files: dict[str, bytes], *, private: bool = False) -> HubRepo:
        self.repos[repo] = HubRepo(dict(files), private=private)
        return self.repos[repo]

    def blob(self, sha256: str) -> bytes | None:
        for repo in self.repos.values():
            for body in repo.files.values():
                if hashlib.sha256(body).hexdigest() == sha256:
                    return body
        return None

    def record(self, request: HubRequest) -> None:
        with self._lock:
            self.requests.append(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: HubState  # set on the subclass per server

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _authorized(self) -> bool:
        auth = self.headers.get("Authorization") or ""
        return auth.startswith("Bearer ") and auth.removeprefix("Bearer ") in self.state.tokens

    def _serve(self, *, body: bool) -> None:
        path = urlsplit(self.path).path
        self.state.record(HubRequest(self.command, path, self.headers.get("Range"), self._authorized()))
        if path.startswith("/api/models/"):
            self._api(path.removeprefix("/api/models/"), body=body)
        elif path.startswith("/lfs/"):
            self._lfs(path.removeprefix("/lfs/"), body=body)
        elif "/resolve/" in path:
            self._resolve(path, body=body)
        else:
            self._error(404, "EntryNotFound", "Not found", body=body)

    def _repo(self, name: str, revision: str, body: bool) -> HubRepo | None:
        repo = self.state.repos.get(name)
        if repo is None or (repo.private and not self._authorized()):
            if repo is not None:
                self._error(401, "RepoNotFound", "Invalid credentials in Authorization header", body=body)
            else:
                self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}", body=body)
            return None
        if revision not in repo.branches and revision != repo.commit:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", body=body)
            return None
        return repo

    def _api(self, rest: str, *, body: bool) -> None:
        name, _, revision = rest.partition("/revision/")
        repo = self._repo(name, unquote(revision or "main"), body)
        if repo is None:
            return
        document = {
            "id": name,
            "modelId": name,
            "sha": repo.commit,
            "private": repo.private,
            "siblings": [{"rfilename": path} for path in sorted(repo.files)],
        }
        self._send(200, json.dumps(document).encode(), {"Content-Type": "application/json"}, body=body)

    def _resolve(self, path: str, *, body: bool) -> None:
        name, _, rest = path.lstrip("/").partition("/resolve/")
        revision, _, file = rest.partition("/")
        repo = self._repo(unquote(name), unquote(revision), body)
        if repo is None:
            return
        contents = repo.files.get(unquote(file))
        if contents is None:
            self._error(404, "EntryNotFound", f"{unquote(file)} does not exist on {revision}", body=body)
            return
        commit = {"X-Repo-Commit": repo.commit}
        if len(contents) < self.state.lfs_threshold:
            self._ranged(contents, f'"{git_blob_id(contents)}"', commit, body=body)
            return
        sha = hashlib.sha256(contents).hexdigest()
        headers = {
            **commit,
            "Location": f"{self.state.base}/lfs/{sha}",
            "X-Linked-Etag": f'"{sha}"',
            "X-Linked-Size": str(len(contents)),
            "ETag": f'"{sha}"',
        }
        self._send(302, b"", headers, body=body)

    def _lfs(self, sha: str, *, body: bool) -> None:
        contents = self.state.blob(sha)
        if contents is None:
            self._error(404, "EntryNotFound", "no such object", body=body)
            return
        self._ranged(contents, f'"{sha}"', {}, body=body)

    def _ranged(self, contents: bytes, etag: str, headers: dict[str, str], *, body: bool) -> None:
        size, start, end, status = len(contents), 0, len(contents) - 1, 200
        wanted = _RANGE.match(self.headers.get("Range") or "")
        if wanted:
            start = int(wanted[1])
            end = min(int(wanted[2]), size - 1) if wanted[2] else size - 1
            if start >= size:
                self._send(416, b"", {"Content-Range": f"bytes */{size}"}, body=body)
                return
            status = 206
        extra = {**headers, "ETag": etag, "Accept-Ranges": "bytes"}
        if status == 206:
            extra["Content-Range"] = f"bytes {start}-{end}/{size}"
        self._send(status, contents[start : end + 1], extra, body=body)

    def _error(self, status: int, code: str, message: str, *, body: bool) -> None:
        headers = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
        self._send(status, json.dumps({"error": message}).encode(), headers, body=body)

    def _send(self, status: int, payload: bytes, headers: dict[str, str], *, body: bool) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if not body:
            return
        try:
            for at in range(0, len(payload), _CHUNK):
                self.wfile.write(payload[at : at + _CHUNK])
        except (BrokenPipeError, ConnectionResetError):
            pass


class _HubServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that hangs up mid-answer (the header reader stops after the bytes it wanted, a
        # download is interrupted) is the client's business, as on the real Hub: not an error.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


@contextmanager
def running_hub(host: str = "127.0.0.1", port: int = 0) -> Iterator[HubState]:
    """A Hub stand-in on `port` of `host` (a free one by default), its state (repositories,
    requests) to fill and read."""
    state = HubState()
    handler = type("HubHandler", (_Handler,), {"state": state})
    server = _HubServer((host, port), handler)
    state.base = f"http://{host}:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="hf-hub", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
