"""The agent's model files: fetched into its cache, or opened where they are, safely.

* http(s): downloaded into `<cache>/<key>/<file>` (the key is the controller's cache key of the
  source), through the same egress rules as the controller's fetches (no loopback, link-local or
  metadata addresses, not the API server or the cluster's networks, every redirect checked;
  `--model-source-allowed-hosts` names exceptions). The download goes to `<file>.partial` and is
  resumed from where it stopped (a Range request, `If-Range` on the ETag it had), hashed as it
  goes, checked against the Model's `sha256` when it has one, flushed and renamed into place: a
  file under its final name is always whole. Progress is logged every few seconds. A disk without
  room for the rest is said before a byte is written; a disk that fills up keeps the part already
  there for the next attempt.
* a local path (`file://` or absolute): opened only under `--model-local-roots`, without following
  a symbolic link out of them, and handed to the server as that open file (`/dev/fd/<n>`): it is
  the file that was checked, whatever happens to the path afterwards. Never copied.
* a HuggingFace repo id: fetched by llama-server itself (`-hf` in extraArgs), as in a pod.

A failure is kept (with the time to try again) and reported; it is tried again after a backoff
(30 s, doubling to 10 minutes), never in a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import aiohttp
import structlog
from yarl import URL

from llmkube.agent.host import free_bytes
from llmkube.api.model import Model
from llmkube.controllers.modelsource.confined import EscapesRoots, open_beneath_roots
from llmkube.controllers.modelsource.egress import PolicySource, TooManyRedirects, open_checked, refused
from llmkube.kube.blocking import run_in_daemon_thread
from llmkube.plan.inferenceservice.metal import MODEL_FETCH_FAILED
from llmkube.plan.model.local_roots import is_beneath
from llmkube.plan.model.source import SourceKind, cache_key, classify_source, local_path, sanitize_filename

log = structlog.get_logger("llmkube.agent.fetch")

CHUNK = 1024 * 1024
PROGRESS_EVERY = 5.0
RETRY_INITIAL, RETRY_MAX = 30.0, 600.0
#: room kept free on the cache's disk beyond the file itself
DISK_MARGIN = 64 * 1024 * 1024
_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=30.0, sock_read=120.0)
ROOTS_FLAG = "--model-local-roots"


@dataclass(frozen=True)
class ModelFile:
    path: str  # what the server loads ("" when it fetches the model itself)
    identity: str  # the same file, whatever path it is reached by
    size: int | None
    pass_fd: int | None = None  # a descriptor the server inherits (local sources)


@dataclass(frozen=True)
class Fetching:
    message: str


@dataclass(frozen=True)
class FetchFailed:
    reason: str
    message: str
    retry_at: float  # monotonic; inf: not until the Model changes


Artifact = ModelFile | Fetching | FetchFailed


class FetchError(Exception):
    def __init__(self, message: str, *, retry: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry


def _human(num: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if num < 1024 or unit == "TiB":
            return f"{num:.1f} {unit}" if unit != "B" else f"{int(num)} B"
        num /= 1024
    return f"{num:.1f} TiB"


def file_name(source: str) -> str:
    """The file's name in the cache: the URL's last path element, made safe."""
    name = sanitize_filename(URL(source).path.rsplit("/", 1)[-1])
    return name or "model.gguf"


class ModelStore:
    def __init__(
        self,
        cache_dir: Path,
        roots: Sequence[str],
        session: aiohttp.ClientSession,
        policy: PolicySource,
        on_progress: Callable[[str], None],
    ) -> None:
        self.cache_dir = cache_dir
        self.roots = tuple(roots)
        self._session = session
        self._policy = policy
        self._on_progress = on_progress
        self._artifacts: dict[tuple[str, str], Artifact] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._failures: dict[tuple[str, str], int] = {}
        self._open: dict[tuple[str, str], int] = {}

    def get(self, model: Model) -> Artifact:
        """What the model's file is now; starts (or retries) a fetch when needed. Never blocks."""
        source, sha = model.spec.source, (model.spec.sha256 or "").lower()
        key = (source, sha)
        known = self._artifacts.get(key)
        if isinstance(known, ModelFile):
            return known
        if isinstance(known, FetchFailed) and time.monotonic() < known.retry_at:
            return known
        if key in self._tasks and not self._tasks[key].done():
            return known or Fetching(f"fetching {source}")
        kind = classify_source(source)
        if kind is SourceKind.HUGGINGFACE:
            artifact: Artifact = ModelFile(path="", identity=f"hf:{source}", size=None)
            self._artifacts[key] = artifact
            return artifact
        if kind is SourceKind.LOCAL and not sha:
            self._artifacts[key] = artifact = self._open_local(key, local_path(source), sha)
            return artifact
        # A download, or a local file to hash first: in the background.
        work = self._verify_local(key) if kind is SourceKind.LOCAL else self._fetch(key)
        self._artifacts[key] = Fetching(
            f"verifying the SHA256 of {source}" if kind is SourceKind.LOCAL else f"fetching {source}"
        )
        self._tasks[key] = asyncio.get_running_loop().create_task(work, name=f"fetch:{source}")
        return self._artifacts[key]

    async def _verify_local(self, key: tuple[str, str]) -> None:
        try:
            self._artifacts[key] = await run_in_daemon_thread(
                self._open_local, key, local_path(key[0]), key[1]
            )
        finally:
            self._on_progress(key[0])

    def forget_unused(self, in_use: set[tuple[str, str]]) -> None:
        """Close the descriptors of local files no Model names any more."""
        for key in [k for k in self._open if k not in in_use]:
            with contextlib.suppress(OSError):
                os.close(self._open.pop(key))
            self._artifacts.pop(key, None)

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- local files ------------------------------------------------------------------------------
    def _open_local(self, key: tuple[str, str], path: str, sha: str) -> Artifact:
        source = key[0]
        violation = _outside_roots(path, self.roots)
        if violation is not None:
            return FetchFailed(MODEL_FETCH_FAILED, f"{source}: {violation}", float("inf"))
        try:
            descriptor = open_beneath_roots(os.path.normpath(path), self.roots)
        except EscapesRoots as error:
            return FetchFailed(
                MODEL_FETCH_FAILED,
                f"{source} is not allowed: {error.detail}; local model files must stay inside {ROOTS_FLAG} "
                f"({', '.join(self.roots)})",
                float("inf"),
            )
        except OSError as error:
            return self._failed(key, f"{source} cannot be opened: {error.strerror or error}")
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            os.close(descriptor)
            return FetchFailed(MODEL_FETCH_FAILED, f"{source} is not a regular file", float("inf"))
        if sha:
            actual = _hash_descriptor(descriptor)
            if actual != sha:
                os.close(descriptor)
                return FetchFailed(
                    MODEL_FETCH_FAILED,
                    f"{source}: SHA256 mismatch: expected {sha}, got {actual}",
                    float("inf"),
                )
        if (old := self._open.pop(key, None)) is not None:
            with contextlib.suppress(OSError):
                os.close(old)
        self._open[key] = descriptor
        identity = (
            f"local:{os.path.realpath(path)}:{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"
        )
        log.info("local model file opened", source=source, size=info.st_size)
        return ModelFile(
            path=f"/dev/fd/{descriptor}", identity=identity, size=info.st_size, pass_fd=descriptor
        )

    def _failed(self, key: tuple[str, str], message: str, *, retry: bool = True) -> FetchFailed:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = min(RETRY_MAX, RETRY_INITIAL * 2 ** min(failures - 1, 10)) if retry else float("inf")
        log.warning("model fetch failed", source=key[0], error=message, retry_in=delay)
        return FetchFailed(MODEL_FETCH_FAILED, message, time.monotonic() + delay)

    # -- downloads --------------------------------------------------------------------------------
    def final_path(self, source: str) -> Path:
        return self.cache_dir / cache_key(source) / file_name(source)

    async def _fetch(self, key: tuple[str, str]) -> None:
        source, sha = key
        final = self.final_path(source)
        try:
            if final.is_file() and await run_in_daemon_thread(_verified, final, sha):
                size = final.stat().st_size
                log.info("model found in the cache", source=source, path=str(final), size=size)
            else:
                await self._download(source, sha, final)
                size = final.stat().st_size
            self._failures.pop(key, None)
            self._artifacts[key] = ModelFile(str(final), f"file:{final}:{sha or _sidecar_sha(final)}", size)
        except FetchError as error:
            self._artifacts[key] = self._failed(key, error.message, retry=error.retry)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # an unexpected failure must not leave the service waiting for ever
            log.exception("model fetch crashed", source=source)
            self._artifacts[key] = self._failed(key, f"fetching {source} failed: {error!r}")
        finally:
            self._on_progress(source)

    async def _download(self, source: str, sha: str, final: Path) -> None:
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.with_name(final.name + ".partial")
        etag_file = final.with_name(final.name + ".partial.etag")
        have = partial.stat().st_size if partial.is_file() else 0
        etag = etag_file.read_text().strip() if have and etag_file.is_file() else ""
        headers = {"Accept-Encoding": "identity"}
        if have and etag:
            headers |= {"Range": f"bytes={have}-", "If-Range": etag}
        try:
            async with open_checked(
                self._session, "GET", source, self._policy, headers=headers, client_timeout=_TIMEOUT
            ) as answer:
                if answer.status == 206:
                    total = _range_total(answer.headers.get("Content-Range", "")) or 0
                    log.info("model download resumed", source=source, have=have, total=total)
                elif answer.status == 200:
                    have, total = 0, int(answer.headers.get("Content-Length") or 0)
                else:
                    raise FetchError(f"{source} answered HTTP {answer.status} {answer.reason or ''}".strip())
                remaining = max(0, total - have)
                room = free_bytes(str(final.parent))
                if total and room is not None and room < remaining + DISK_MARGIN:
                    raise FetchError(
                        f"the model cache {self.cache_dir} has {_human(room)} free; {source} needs "
                        f"{_human(remaining)} more (and {_human(DISK_MARGIN)} to spare): free some room "
                        "or point --model-cache-dir at a larger disk"
                    )
                if new_etag := answer.headers.get("ETag", ""):
                    etag_file.write_text(new_etag)
                digest = await run_in_daemon_thread(_hash_prefix, partial, have)
                await self._stream(answer, partial, have, total, digest, (source, sha))
        except FetchError:
            raise
        except OSError as error:
            denied = refused(error)
            if denied is not None:
                raise FetchError(f"{source} is not fetched: {denied.detail}", retry=True) from None
            if error.errno == errno.ENOSPC:
                raise FetchError(
                    f"the model cache {self.cache_dir} is full ({source}: {partial.stat().st_size} bytes "
                    "fetched so far, kept for the next attempt)"
                ) from None
            raise FetchError(f"fetching {source} failed: {error.strerror or error}") from None
        except TooManyRedirects as error:
            raise FetchError(f"{source}: {error}") from None
        except (aiohttp.ClientError, TimeoutError) as error:
            denied = refused(error)
            if denied is not None:
                raise FetchError(f"{source} is not fetched: {denied.detail}") from None
            raise FetchError(f"fetching {source} failed: {error!r}") from None
        size = partial.stat().st_size
        actual = digest.hexdigest()
        if sha and actual != sha:
            partial.unlink()
            raise FetchError(
                f"{source}: SHA256 mismatch: expected {sha}, got {actual} (the download is discarded)"
            )
        await run_in_daemon_thread(_fsync, partial)
        final.with_name(final.name + ".sha256").write_text(actual + "\n")
        os.replace(partial, final)
        with contextlib.suppress(OSError):
            etag_file.unlink()
        log.info("model downloaded", source=source, path=str(final), size=size, sha256=actual)

    async def _stream(
        self,
        answer: aiohttp.ClientResponse,
        partial: Path,
        have: int,
        total: int,
        digest: hashlib._Hash,
        key: tuple[str, str],
    ) -> None:
        source = key[0]
        started = last = time.monotonic()
        done = have
        # The disk and the hash in a thread: the agent's loop also supervises the servers.
        out = await run_in_daemon_thread(open, partial, "ab" if have else "wb")
        try:
            async for chunk in answer.content.iter_chunked(CHUNK):
                await run_in_daemon_thread(_write_and_hash, out, digest, chunk)
                done += len(chunk)
                now = time.monotonic()
                if now - last >= PROGRESS_EVERY:
                    last = now
                    rate = (done - have) / max(now - started, 1e-3)
                    share = f" ({100 * done / total:.0f}%)" if total else ""
                    of = f" of {_human(total)}" if total else ""
                    message = f"fetching {source}: {_human(done)}{of}{share}, {_human(rate)}/s"
                    log.info(
                        "model download progress", source=source, bytes=done, total=total, rate=int(rate)
                    )
                    self._artifacts[key] = Fetching(message)
                    self._on_progress(source)
        finally:
            await run_in_daemon_thread(out.close)
        if total and done != total:
            raise FetchError(
                f"{source}: the download ended after {done} of {total} bytes (it is resumed next time)"
            )


def _outside_roots(path: str, roots: Sequence[str]) -> str | None:
    if not roots:
        return (
            f"local model files are not served: this agent reads local files only under {ROOTS_FLAG}, "
            "and none are set"
        )
    listed = ", ".join(roots)
    if not path.startswith("/") or any(element in (".", "..") for element in path.split("/")):
        return (
            'a local model source must be an absolute path without "." or ".." elements '
            f"({ROOTS_FLAG}: {listed})"
        )
    if not any(is_beneath(os.path.normpath(path), root) for root in roots):
        return f"it is outside the directories this agent may read local models from ({ROOTS_FLAG}: {listed})"
    return None


def _write_and_hash(out: BinaryIO, digest: hashlib._Hash, chunk: bytes) -> None:
    out.write(chunk)
    digest.update(chunk)


def _range_total(content_range: str) -> int | None:
    _, _, total = content_range.rpartition("/")
    return int(total) if total.isdigit() else None


def _hash_prefix(path: Path, length: int) -> hashlib._Hash:
    digest = hashlib.sha256()
    if length:
        with open(path, "rb") as file:
            remaining = length
            while remaining > 0 and (block := file.read(min(CHUNK, remaining))):
                digest.update(block)
                remaining -= len(block)
        with open(path, "r+b") as file:
            file.truncate(length)  # anything past what the hash covered is not trusted
    return digest


def _hash_descriptor(descriptor: int) -> str:
    digest = hashlib.sha256()
    offset = 0
    while block := os.pread(descriptor, CHUNK, offset):
        digest.update(block)
        offset += len(block)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    with open(path, "rb") as file:
        os.fsync(file.fileno())


def _sidecar_sha(final: Path) -> str:
    with contextlib.suppress(OSError):
        return final.with_name(final.name + ".sha256").read_text().strip()
    return ""


def _verified(final: Path, sha: str) -> bool:
    """A file already in the cache is used when its recorded hash (written when it was fetched)
    matches the Model's; without a sha256 in the Model, the file under its final name is whole."""
    if not sha:
        return True
    recorded = _sidecar_sha(final)
    if recorded:
        return recorded == sha
    digest = hashlib.sha256()
    with open(final, "rb") as file:
        while block := file.read(CHUNK):
            digest.update(block)
    return digest.hexdigest() == sha
