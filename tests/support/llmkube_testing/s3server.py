"""A real S3-compatible server for the s3:// Model tests: MinIO, built from a pinned version through
the Go module proxy by `hack/build-tools.sh minio` into ~/.cache/llmkube/tools/bin.

MinIO is what air-gapped sites run for their buckets, and it checks what the downloader must get
right: SigV4 signatures over path-style requests with the region the server is configured with,
private buckets (no anonymous access unless a policy says so), and refusals in S3's XML
(`<Code>InvalidAccessKeyId</Code>`, `SignatureDoesNotMatch`, `NoSuchKey`, `AccessDenied`).

    with running_minio(tmp_path) as s3:
        s3.make_bucket("models")
        s3.put("models", "tiny/model.gguf", body)
        s3.requests()  # what it answered so far, from its own metrics: {"GetObject": 6, ...}

Objects are written with curl's SigV4 signer (`--aws-sigv4`), the same signer the downloader
uses; the server, not the client, decides whether a signature is right. `reach` is for a server
listening where this process cannot connect (inside the node tier's network namespace): the
address of a forward that leads to it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BUILD_COMMAND",
    "Credentials",
    "MinioServer",
    "S3Reply",
    "minio_binary",
    "running_minio",
]

BUILD_COMMAND = "bash hack/build-tools.sh minio"
#: Not AWS's default: a downloader that signs for another region is refused (AuthorizationHeaderMalformed).
REGION = "eu-central-1"


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    region: str = REGION

    def secret_data(self, endpoint: str) -> dict[str, str]:
        """The keys of a Model's `sourceSecretRef` for this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL": endpoint,
        }


ROOT = Credentials("llmkube-root", "llmkube-root-secret-0123")


@dataclass(frozen=True)
class S3Reply:
    status: int
    body: bytes

    @property
    def code(self) -> str:
        """S3's error code (`<Code>` of the XML body), or ""."""
        text = self.body.decode("utf-8", "replace")
        start = text.find("<Code>")
        end = text.find("</Code>", start)
        return text[start + 6 : end] if start >= 0 and end > start else ""


def minio_binary() -> Path:
    """The MinIO server binary hack/build-tools.sh built (LLMKUBE_TOOLS_BIN, else the cache)."""
    if explicit := os.environ.get("LLMKUBE_TOOLS_BIN"):
        return Path(explicit) / "minio"
    cache = os.environ.get("LLMKUBE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "llmkube"
    )
    return Path(cache) / "tools" / "bin" / "minio"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class MinioServer:
    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        credentials: Credentials = ROOT,
        binary: Path | None = None,
        preexec_fn: Callable[[], None] | None = None,
        reach: str | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = port or free_port(host)
        self.credentials = credentials
        self.binary = binary or minio_binary()
        self.preexec_fn = preexec_fn
        self.reach = reach
        self.log_path = data_dir.parent / f"{data_dir.name}.minio.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """Where clients in the server's own network reach it (AWS_ENDPOINT_URL)."""
        return f"http://{self.host}:{self.port}"

    @property
    def client_endpoint(self) -> str:
        """Where this process reaches it."""
        return self.reach or self.endpoint

    def start(self, within: float = 60.0) -> MinioServer:
        if not os.access(self.binary, os.X_OK):
            raise FileNotFoundError(f"{self.binary} is missing. Build it with: {BUILD_COMMAND}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.data_dir.parent),
            "MINIO_ROOT_USER": self.credentials.access_key,
            "MINIO_ROOT_PASSWORD": self.credentials.secret_key,
            "MINIO_SITE_REGION": self.credentials.region,
            "MINIO_BROWSER": "off",
            # Its request counters, for the tests' "no retry storm", without a bearer token.
            "MINIO_PROMETHEUS_AUTH_TYPE": "public",
            "MINIO_UPDATE": "off",
            "MINIO_CI_CD": "1",  # no "are you sure" about a single drive, no hints on the terminal
        }
        log = self.log_path.open("ab")
        try:
            self._process = subprocess.Popen(
                [
                    str(self.binary),
                    "server",
                    str(self.data_dir),
                    "--address",
                    f"{self.host}:{self.port}",
                    "--console-address",
                    f"{self.host}:{free_port() if self.preexec_fn is None else self.port + 1}",
                    "--quiet",
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=self.preexec_fn,
            )
        finally:
            log.close()
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"minio exited with {self._process.returncode}: {self.log()}")
            # /minio/health/ready can answer 200 while the object layer is still being set up, and
            # S3 calls then get 503 XMinioServerNotInitialized; a signed ListBuckets answering 200
            # is the state the callers need.
            if self.request("GET", "/", sign=True).status == 200:
                return self
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"minio not ready at {self.client_endpoint} within {within} s: {self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        self._process = None

    def request(
        self,
        method: str,
        path: str,
        *,
        upload: Path | None = None,
        credentials: Credentials | None = None,
        sign: bool = True,
    ) -> S3Reply:
        """One path-style request, signed (SigV4) with `credentials` (the server's own by default)."""
        creds = credentials or self.credentials
        config = ""
        if sign:
            config = (
                f'user = "{creds.access_key}:{creds.secret_key}"\naws-sigv4 = "aws:amz:{creds.region}:s3"\n'
            )
        with tempfile.NamedTemporaryFile() as out:
            argv = ["curl", "-K", "-", "-sS", "-X", method, "-o", out.name, "-w", "%{http_code}"]
            if upload is not None:
                argv += ["-T", str(upload)]
            argv += ["--url", f"{self.client_endpoint}{path}"]
            result = subprocess.run(
                argv, input=config, capture_output=True, text=True, timeout=120, check=False
            )
            status = int(result.stdout or "0") if result.stdout.isdigit() else 0
            return S3Reply(status, Path(out.name).read_bytes())

    def make_bucket(self, bucket: str) -> None:
        reply = self.request("PUT", f"/{bucket}")
        if reply.status != 200:
            raise RuntimeError(f"PUT /{bucket}: HTTP {reply.status} {reply.code}")

    def put(self, bucket: str, key: str, body: bytes | Path) -> None:
        if isinstance(body, Path):
            reply = self.request("PUT", f"/{bucket}/{key}", upload=body)
        else:
            with tempfile.NamedTemporaryFile() as file:
                file.write(body)
                file.flush()
                reply = self.request("PUT", f"/{bucket}/{key}", upload=Path(file.name))
        if reply.status != 200:
            raise RuntimeError(f"PUT /{bucket}/{key}: HTTP {reply.status} {reply.code}")

    def requests(self, series: str = "minio_api_requests_total") -> dict[str, float]:
        """What the server counted since it started, by S3 API (`{"GetObject": 6, ...}`), from its
        own metrics (v3, computed on each scrape; v2's are cached for seconds). `series`:
        `minio_api_requests_4xx_errors_total` for the refused ones."""
        counts: dict[str, float] = {}
        text = self.request("GET", "/minio/metrics/v3/api/requests", sign=False).body.decode()
        for line in text.splitlines():
            if not line.startswith(series + "{"):
                continue
            labels, _, value = line[len(series) + 1 :].rpartition("} ")
            for label in labels.split(","):
                key, _, quoted = label.partition("=")
                if key == "name":
                    api = quoted.strip('"')
                    counts[api] = counts.get(api, 0.0) + float(value)
        return counts


@contextmanager
def running_minio(workdir: Path) -> Iterator[MinioServer]:
    """A server on loopback with its data under `workdir`, stopped and its data removed after."""
    server = MinioServer(workdir / "minio-data")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.data_dir, ignore_errors=True)
