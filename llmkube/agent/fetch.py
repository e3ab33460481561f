"""The agent's model files: fetched into its cache, or opened where they are, safely.

* http(s): downloaded into `<cache>/<key>/<file>` (the key is the controller's cache key of the
  source), through the same egress rules as the controller's fetches (no loopback, link-local or
  metadata addresses, not the API server or the cluster's networks, every redirect checked;
  `--model-source-allowed-hosts` names exceptions).
* a Hugging Face repository with `files` (and `mmproj`): each file from the Hub's file API
  (`--hf-endpoint`, as the controller's), the same way, into `<cache>/<key>/files/<path>`, side by
  side as the repository has them (llama.cpp finds a split GGUF's other shards beside the first);
  the server is given the first file and the projector. A repository without `files` is not
  served (plan/agent/support.py says what to add): the agent never lets llama-server fetch from
  the Hub itself (`-hf` can load a repository's presets, settings of the repository's choosing).
* a local path (`file://` or absolute): opened only under `--model-local-roots`, without following
  a symbolic link out of them, and handed to the server as that open file (`/dev/fd/<n>`): it is
  the file that was checked, whatever happens to the path afterwards. Never copied.

A download goes to a `.partial` file and is resumed from where it stopped (a Range request,
`If-Range` on the ETag it had), hashed as it goes, checked against the Model's `sha256` when it has
one (the first file's), flushed and renamed into place: a file under its final name is always
whole. What it may take is plan/agent/download.py's to say: a length it announced or the Model's
declared size, never past `--max-model-bytes` or the disk's room, never slower than
`--download-min-speed` for long; a body past its limit or a full disk (ENOSPC, EDQUOT) stops it at
once, the connection closed and the partial file deleted. Progress is logged every few seconds.

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
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import aiohttp
import structlog
from yarl import URL

from llmkube.agent.host import free_bytes
from llmkube.api.model import Model
from llmkube.kube.blocking import run_in_daemon_thread
from llmkube.plan.agent.artifact import Artifact, FetchFailed, Fetching, ModelFile
from llmkube.plan.agent.download import (
    AnswerHead,
    Declared,
    DownloadLimits,
    Ending,
    Limit,
    Refusal,
    SpeedWindow,
    advanced,
    deadline,
    declared_left,
    declared_size,
    disk_full_message,
    file_limit,
    keeps_partial,
    past_limit,
    past_limit_message,
    read_head,
    too_slow,
    too_slow_message,
)
from llmkube.plan.agent.support import hf_files_missing
from llmkube.plan.inferenceservice.metal import MODEL_FETCH_FAILED
from llmkube.plan.model.fileset import FileSetProblem
from llmkube.plan.model.local_roots import is_beneath
from llmkube.plan.model.remote import DEFAULT_HF_ENDPOINT, RemoteSource, remote_source
from llmkube.plan.model.size import format_size
from llmkube.plan.model.source import SourceKind, cache_key, classify_source, local_path, sanitize_filename
from llmkube.sources import (
    EscapesRoots,
    PolicySource,
    TooManyRedirects,
    open_beneath_roots,
    open_checked,
    refused,
)

log = structlog.get_logger("llmkube.agent.fetch")

CHUNK = 1024 * 1024
PROGRESS_EVERY = 5.0
RETRY_INITIAL, RETRY_MAX = 30.0, 600.0
_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=30.0, sock_read=120.0)
ROOTS_FLAG = "--model-local-roots"
#: what a full disk or an exhausted quota says (the partial file goes, the room missing is told)
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
#: answers that say "try again later", not "this file is not there"
_TRANSIENT_STATUS = frozenset({408, 425, 429})
_FETCHED_KINDS = frozenset({SourceKind.HTTP, SourceKind.HF, SourceKind.HUGGINGFACE, SourceKind.LOCAL})


class FetchKey(NamedTuple):
    """What makes two Models' files the same fetch: a change of any of it is a new one."""

    source: str
    sha: str
    files: tuple[str, ...] = ()
    mmproj: str = ""
    declared: int = 0  # hardware.memoryBudget's bytes (0: none), the limit of an answer without a length


class FetchError(Exception):
    """`ending`: what became of the download, which says whether its partial file stays (None:
    nothing was written, the partial file is left as it was)."""

    def __init__(self, message: str, *, retry: bool = True, ending: Ending | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry
        self.ending = ending


@dataclass(frozen=True)
class CachedFile:
    """One file to fetch: where from, and where it and its bookkeeping go in the cache."""

    url: str
    final: Path
    partial: Path
    etag: Path  # the ETag the partial file was fetched under (If-Range)
    sha_file: Path  # the SHA-256 recorded when it was fetched
    sha: str = ""  # what it must hash to ("" when nothing says)


@dataclass
class _Transfer:
    """How far one download got, for what is said when it stops."""

    done: int = 0
    limit: Limit | None = None
    known: bool = False  # the answer said the file's length
    resumable: bool = False  # ... and gave an ETag: a resumed request can continue it


def file_name(source: str) -> str:
    """The file's name in the cache: the URL's last path element, made safe."""
    name = sanitize_filename(URL(source).path.rsplit("/", 1)[-1])
    return name or "model.gguf"


def _single(final: Path, url: str, sha: str) -> CachedFile:
    """An http(s) source's one file, its bookkeeping beside it."""
    return CachedFile(
        url,
        final,
        final.with_name(final.name + ".partial"),
        final.with_name(final.name + ".partial.etag"),
        final.with_name(final.name + ".sha256"),
        sha,
    )


def _staged(base: Path, dest: str, url: str, sha: str) -> CachedFile:
    """A listed file: under `files/` as the repository has it; its bookkeeping under `downloads/`,
    named by a digest of its path, where no listed file's name can reach."""
    tag = hashlib.sha256(dest.encode()).hexdigest()[:16]
    meta = base / "downloads"
    return CachedFile(
        url,
        base / "files" / dest,
        meta / f"{tag}.partial",
        meta / f"{tag}.etag",
        meta / f"{tag}.sha256",
        sha,
    )


@dataclass(frozen=True)
class _Plan:
    """The files of one fetch, the one the server loads first."""

    targets: tuple[CachedFile, ...]
    mmproj: CachedFile | None = None
    base: Path | None = None  # the Model's directory when it stages several files


class ModelStore:
    def __init__(
        self,
        cache_dir: Path,
        roots: Sequence[str],
        session: aiohttp.ClientSession,
        policy: PolicySource,
        on_progress: Callable[[str], None],
        *,
        limits: DownloadLimits | None = None,
        hf_endpoint: str = DEFAULT_HF_ENDPOINT,
    ) -> None:
        self.cache_dir = cache_dir
        self.roots = tuple(roots)
        self.limits = limits or DownloadLimits()
        self.hf_endpoint = hf_endpoint
        self._session = session
        self._policy = policy
        self._on_progress = on_progress
        self._artifacts: dict[FetchKey, Artifact] = {}
        self._tasks: dict[FetchKey, asyncio.Task[None]] = {}
        self._failures: dict[FetchKey, int] = {}
        self._open: dict[FetchKey, int] = {}
        # One download of a file at a time: two Models of one source share its cache files.
        self._writing: dict[Path, asyncio.Lock] = {}

    @staticmethod
    def key_of(model: Model) -> FetchKey:
        spec = model.spec
        declared = declared_size(spec.hardware)
        return FetchKey(
            spec.source,
            (spec.sha256 or "").lower(),
            tuple(spec.files or ()),
            spec.mmproj or "",
            declared.bytes if declared else 0,
        )

    def get(self, model: Model) -> Artifact:
        """What the model's file is now; starts (or retries) a fetch when needed. Never blocks."""
        key = self.key_of(model)
        source, sha, declared = key.source, key.sha, declared_size(model.spec.hardware)
        known = self._artifacts.get(key)
        if isinstance(known, ModelFile):
            return known
        if isinstance(known, FetchFailed) and time.monotonic() < known.retry_at:
            return known
        if key in self._tasks and not self._tasks[key].done():
            return known or Fetching(f"fetching {source}")
        kind = classify_source(source)
        if kind not in _FETCHED_KINDS:
            artifact: Artifact = FetchFailed(
                MODEL_FETCH_FAILED,
                f"{source}: the agent fetches http(s), Hugging Face and local sources only",
                float("inf"),
            )
            self._artifacts[key] = artifact
            return artifact
        if kind is SourceKind.LOCAL and not sha:
            self._artifacts[key] = artifact = self._open_local(key, local_path(source), sha)
            return artifact
        if kind is SourceKind.LOCAL:  # a local file to hash first: in the background
            self._artifacts[key] = Fetching(f"verifying the SHA256 of {source}")
            self._start(key, self._verify_local(key))
            return self._artifacts[key]
        plan = self._plan(model, key, kind)
        if isinstance(plan, FetchFailed):
            self._artifacts[key] = plan
            return plan
        self._artifacts[key] = Fetching(f"fetching {source}")
        self._start(key, self._fetch(key, plan, declared))
        return self._artifacts[key]

    def _start(self, key: FetchKey, work: Coroutine[Any, Any, None]) -> None:
        self._tasks[key] = asyncio.get_running_loop().create_task(work, name=f"fetch:{key.source}")

    def _plan(self, model: Model, key: FetchKey, kind: SourceKind) -> _Plan | FetchFailed:
        if kind is SourceKind.HTTP:
            return _Plan((_single(self.final_path(key.source), key.source, key.sha),))
        remote = remote_source(model, self.hf_endpoint)
        if remote is None:  # a whole repository (support.py reports it before it gets here)
            return FetchFailed(MODEL_FETCH_FAILED, hf_files_missing(model), float("inf"))
        if isinstance(remote, FileSetProblem):
            return FetchFailed(MODEL_FETCH_FAILED, f"{key.source}: {remote.text()}", float("inf"))
        return self._staged_plan(key, remote)

    def _staged_plan(self, key: FetchKey, remote: RemoteSource) -> _Plan:
        base = self.cache_dir / cache_key(key.source)
        targets = tuple(
            _staged(base, file.dest, file.location, key.sha if index == 0 else "")
            for index, file in enumerate(remote.files)
        )
        mmproj = next(
            (t for t, f in zip(targets, remote.files, strict=True) if f.dest == remote.mmproj), None
        )
        return _Plan(targets, mmproj, base)

    async def _verify_local(self, key: FetchKey) -> None:
        try:
            self._artifacts[key] = await run_in_daemon_thread(
                self._open_local, key, local_path(key.source), key.sha
            )
        finally:
            self._on_progress(key.source)

    def holds_open_files(self) -> bool:
        return bool(self._open)

    def forget_unused(self, in_use: set[FetchKey]) -> None:
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
    def _open_local(self, key: FetchKey, path: str, sha: str) -> Artifact:
        source = key.source
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

    def _failed(self, key: FetchKey, message: str, *, retry: bool = True) -> FetchFailed:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = min(RETRY_MAX, RETRY_INITIAL * 2 ** min(failures - 1, 10)) if retry else float("inf")
        log.warning("model fetch failed", source=key.source, error=message, retry_in=delay)
        return FetchFailed(MODEL_FETCH_FAILED, message, time.monotonic() + delay)

    # -- downloads --------------------------------------------------------------------------------
    def final_path(self, source: str) -> Path:
        return self.cache_dir / cache_key(source) / file_name(source)

    async def _fetch(self, key: FetchKey, plan: _Plan, declared: Declared | None) -> None:
        source = key.source
        try:
            used, recorded = 0, []
            for index, target in enumerate(plan.targets):
                step = "" if len(plan.targets) == 1 else f"file {index + 1} of {len(plan.targets)}, "
                async with self._writing.setdefault(target.final, asyncio.Lock()):
                    if target.final.is_file() and await run_in_daemon_thread(_verified, target):
                        log.info(
                            "model found in the cache",
                            source=source,
                            path=str(target.final),
                            size=target.final.stat().st_size,
                        )
                    else:
                        await self._download(target, declared_left(declared, used), key, step)
                    used += target.final.stat().st_size
                    recorded.append(target.sha or _recorded_sha(target))
            self._failures.pop(key, None)
            primary = plan.targets[0]
            if plan.base is None:
                identity = f"file:{primary.final}:{recorded[0]}"
            else:
                listed = "\n".join(f"{t.final}={sha}" for t, sha in zip(plan.targets, recorded, strict=True))
                identity = f"files:{plan.base}:{hashlib.sha256(listed.encode()).hexdigest()[:32]}"
            self._artifacts[key] = ModelFile(
                str(primary.final),
                identity,
                used,
                mmproj=str(plan.mmproj.final) if plan.mmproj is not None else "",
            )
        except FetchError as error:
            self._artifacts[key] = self._failed(key, error.message, retry=error.retry)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # an unexpected failure must not leave the service waiting for ever
            log.exception("model fetch crashed", source=source)
            self._artifacts[key] = self._failed(key, f"fetching {source} failed: {error!r}")
        finally:
            self._on_progress(source)

    async def _download(
        self, target: CachedFile, declared: Declared | None, key: FetchKey, step: str
    ) -> None:
        url, partial = target.url, target.partial
        target.final.parent.mkdir(parents=True, exist_ok=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        have = partial.stat().st_size if partial.is_file() else 0
        etag = target.etag.read_text().strip() if have and target.etag.is_file() else ""
        headers = {"Accept-Encoding": "identity"}
        asked_from: int | None = None
        if have and etag:
            headers |= {"Range": f"bytes={have}-", "If-Range": etag}
            asked_from = have
        transfer = _Transfer(done=have)
        try:
            async with open_checked(
                self._session, "GET", url, self._policy, headers=headers, client_timeout=_TIMEOUT
            ) as answer:
                try:
                    digest = await self._receive(answer, target, declared, asked_from, transfer, key, step)
                finally:
                    # Never back into the pool: a body longer than its Content-Length leaves its
                    # rest on the connection, where it would be read as the next answer.
                    answer.close()
            actual = digest.hexdigest()
            if target.sha and actual != target.sha:
                raise FetchError(
                    f"{url}: SHA256 mismatch: expected {target.sha}, got {actual} "
                    "(the download is discarded)",
                    ending=Ending.MISMATCH,
                )
            await run_in_daemon_thread(_fsync, partial)
            target.sha_file.write_text(actual + "\n")
            os.replace(partial, target.final)
        except FetchError as error:
            self._settle(target, transfer, error.ending)
            raise
        except OSError as error:
            denied = refused(error)
            if denied is not None:
                raise FetchError(f"{url} is not fetched: {denied.detail}") from None
            if error.errno in DISK_FULL:
                self._settle(target, transfer, Ending.DISK_FULL)
                raise FetchError(self._disk_full(url, error, transfer)) from None
            self._settle(target, transfer, Ending.CUT_SHORT if transfer.limit else None)
            raise FetchError(f"fetching {url} failed: {error.strerror or error}") from None
        except TooManyRedirects as error:
            raise FetchError(f"{url}: {error}") from None
        except (aiohttp.ClientError, TimeoutError) as error:
            denied = refused(error)
            if denied is not None:
                raise FetchError(f"{url} is not fetched: {denied.detail}") from None
            self._settle(target, transfer, Ending.CUT_SHORT if transfer.limit else None)
            kept = " (the part is kept and resumed next time)" if transfer.resumable else ""
            raise FetchError(f"fetching {url} failed after {transfer.done} bytes: {error!r}{kept}") from None
        with contextlib.suppress(OSError):
            target.etag.unlink()
        log.info(
            "model downloaded",
            source=key.source,
            url=url,
            path=str(target.final),
            size=transfer.done,
            sha256=actual,
        )

    def _disk_full(self, url: str, error: OSError, transfer: _Transfer) -> str:
        limit = transfer.limit or Limit(transfer.done, "the file")
        return disk_full_message(
            url,
            str(self.cache_dir),
            reason=error.strerror or os.strerror(error.errno or errno.ENOSPC),
            done=transfer.done,
            limit=limit,
            margin=self.limits.disk_margin,
            known=transfer.known,
        )

    @staticmethod
    def _settle(target: CachedFile, transfer: _Transfer, ending: Ending | None) -> None:
        """Keep the partial file for the next attempt, or delete it (and what it was fetched under)."""
        if ending is None or keeps_partial(ending, resumable=transfer.resumable):
            return
        for path in (target.partial, target.etag):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    async def _receive(
        self,
        answer: aiohttp.ClientResponse,
        target: CachedFile,
        declared: Declared | None,
        asked_from: int | None,
        transfer: _Transfer,
        key: FetchKey,
        step: str,
    ) -> hashlib._Hash:
        """The answer's head checked against the limits, then its body into the partial file."""
        url = target.url
        if answer.status not in (200, 206):
            said = f"{url} answered HTTP {answer.status} {answer.reason or ''}".strip()
            transient = answer.status in _TRANSIENT_STATUS or answer.status >= 500
            raise FetchError(said, ending=None if transient else Ending.REFUSED)
        body = read_head(
            AnswerHead(
                answer.status,
                answer.headers.get("Content-Length"),
                answer.headers.get("Content-Range"),
                answer.headers.get("Content-Encoding"),
            ),
            asked_from,
        )
        if isinstance(body, Refusal):
            raise FetchError(f"{url} {body.message}", ending=Ending.REFUSED)
        free = free_bytes(str(target.partial.parent))
        limit = file_limit(body, declared, self.limits, free, source=url, cache_dir=str(self.cache_dir))
        if isinstance(limit, Refusal):
            raise FetchError(f"{url} {limit.message}", ending=Ending.REFUSED)
        new_etag = answer.headers.get("ETag", "")
        transfer.done, transfer.limit = body.start, limit
        transfer.known = body.total is not None
        transfer.resumable = transfer.known and bool(new_etag)
        if body.start:
            log.info("model download resumed", source=key.source, url=url, have=body.start, total=body.total)
        if new_etag:
            target.etag.write_text(new_etag)
        else:
            with contextlib.suppress(FileNotFoundError):
                target.etag.unlink()
        digest = await run_in_daemon_thread(_hash_prefix, target.partial, body.start)
        await self._stream(answer, target, body.total, limit, digest, transfer, key, step)
        return digest

    async def _stream(
        self,
        answer: aiohttp.ClientResponse,
        target: CachedFile,
        total: int | None,
        limit: Limit,
        digest: hashlib._Hash,
        transfer: _Transfer,
        key: FetchKey,
        step: str,
    ) -> None:
        url, limits = target.url, self.limits
        started = last = time.monotonic()
        have = done = transfer.done
        window = SpeedWindow(started)
        # The disk and the hash in a thread: the agent's loop also supervises the servers. Unbuffered,
        # so every write reaches the file system (and its ENOSPC) before the next chunk is read.
        out = await run_in_daemon_thread(open, target.partial, "ab" if have else "wb", buffering=0)
        try:
            while True:
                now = time.monotonic()
                if too_slow(window, now, limits):
                    kept = keeps_partial(Ending.TOO_SLOW, resumable=transfer.resumable)
                    raise FetchError(too_slow_message(url, done, limits, kept=kept), ending=Ending.TOO_SLOW)
                wait = deadline(window, limits) - now
                try:
                    async with asyncio.timeout(wait if wait != float("inf") else None) as reading:
                        chunk = await answer.content.read(CHUNK)
                except TimeoutError:
                    if reading.expired():
                        continue  # the floor's deadline: looked at again above
                    raise  # the session's own (no byte at all for its sock_read)
                if not chunk:
                    break
                if past_limit(done + len(chunk), limit):
                    raise FetchError(
                        past_limit_message(url, done + len(chunk), limit), ending=Ending.PAST_LIMIT
                    )
                await run_in_daemon_thread(_write_and_hash, out, digest, chunk)
                done += len(chunk)
                transfer.done = done
                now = time.monotonic()
                window = advanced(window, now, len(chunk), limits)
                if now - last >= PROGRESS_EVERY:
                    last = now
                    rate = (done - have) / max(now - started, 1e-3)
                    share = f" ({100 * done / total:.0f}%)" if total else ""
                    of = f" of {format_size(total)}" if total else ""
                    speed = format_size(int(rate))
                    message = f"fetching {key.source}: {step}{format_size(done)}{of}{share}, {speed}/s"
                    log.info(
                        "model download progress",
                        source=key.source,
                        url=url,
                        bytes=done,
                        total=total,
                        rate=int(rate),
                    )
                    self._artifacts[key] = Fetching(message)
                    self._on_progress(key.source)
        finally:
            await run_in_daemon_thread(out.close)
        if total is not None and done != total:
            raise FetchError(
                f"{url}: the download ended after {done} of {total} bytes"
                + (" (it is resumed next time)" if transfer.resumable else ""),
                ending=Ending.CUT_SHORT,
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
    view = memoryview(chunk)
    while view:  # a raw write may take part of it (the disk filling up): the next one says why
        written = out.write(view)
        view = view[written or 0 :]
    digest.update(chunk)


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


def _recorded_sha(target: CachedFile) -> str:
    with contextlib.suppress(OSError):
        return target.sha_file.read_text().strip()
    return ""


def _verified(target: CachedFile) -> bool:
    """A file already in the cache is used when its recorded hash (written when it was fetched)
    matches the one it must have; without one, the file under its final name is whole."""
    if not target.sha:
        return True
    recorded = _recorded_sha(target)
    if recorded:
        return recorded == target.sha
    digest = hashlib.sha256()
    with open(target.final, "rb") as file:
        while block := file.read(CHUNK):
            digest.update(block)
    return digest.hexdigest() == target.sha
