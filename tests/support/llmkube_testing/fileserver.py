"""A static file server for model files in tests: GET and HEAD with single byte ranges and ETags,
like the hubs and object stores models come from (the Model controller reads a GGUF header with
Range requests; the model-downloader init container sends conditional requests).

    python -m llmkube_testing.fileserver DIRECTORY [--port 8080]

Standard library only: a pod runs it as a script with the controller image's Python (the image has
neither the test dependencies nor `llmkube_testing`).
"""

import argparse
import hashlib
import http.server
import io
import os
import re
import signal
import sys
from pathlib import Path
from typing import IO

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_CHUNK = 1 << 16


class ModelFileHandler(http.server.BaseHTTPRequestHandler):
    server_version = "llmkube-fileserver"
    protocol_version = "HTTP/1.1"
    directory: Path = Path()

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, *, body: bool) -> None:
        path = self._resolve()
        if path is None:
            self._empty(404)
            return
        size = path.stat().st_size
        etag = _etag(path)
        if self.headers.get("If-None-Match") == etag:
            self._empty(304, etag=etag)
            return
        start, end, status = 0, size - 1, 200
        if header := self.headers.get("Range"):
            wanted = _parse_range(header, size)
            if wanted is None:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            (start, end), status = wanted, 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if body:
            with path.open("rb") as file:
                _copy(file, self.wfile, start, end - start + 1)

    def _resolve(self) -> Path | None:
        relative = self.path.split("?", 1)[0].lstrip("/")
        candidate = (self.directory / relative).resolve()
        if self.directory.resolve() not in candidate.parents or not candidate.is_file():
            return None
        return candidate

    def _empty(self, status: int, etag: str = "") -> None:
        self.send_response(status)
        if etag:
            self.send_header("ETag", etag)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """One `bytes=a-b` / `bytes=a-` / `bytes=-n` range, clipped to the file; None if unsatisfiable."""
    match = _RANGE.match(header.strip())
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":
        start, end = max(0, size - int(last)), size - 1
    else:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
    return (start, end) if start <= end < size else None


def _etag(path: Path) -> str:
    stat = path.stat()
    return '"' + hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16] + '"'


def _copy(source: IO[bytes], sink: IO[bytes] | io.BufferedIOBase, offset: int, length: int) -> None:
    source.seek(offset)
    while length > 0 and (chunk := source.read(min(_CHUNK, length))):
        sink.write(chunk)
        length -= len(chunk)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve model files with byte ranges and ETags.")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    # PID 1 of a container ignores SIGTERM unless it handles it: stop at once when the pod is deleted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    handler = type("Handler", (ModelFileHandler,), {"directory": args.directory})
    server = http.server.ThreadingHTTPServer(("", args.port), handler)
    print(f"serving {args.directory} on :{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
