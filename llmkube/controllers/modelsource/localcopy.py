"""Copy a local model file into the controller cache, and verify a file already there.

Blocking file work: the async wrappers run it in a stoppable thread (`llmkube.kube.blocking`): a
copy or a hash checks its StopFlag between chunks, so cancelling the reconcile (a lost lease, a
shutdown) stops it within a chunk and removes the partial file. Apart from that StopRequested,
nothing here raises; every failure comes back as a FetchError whose kind drives the retry policy in
the planner.
"""

import contextlib
import hashlib
import os
import stat
import tempfile
import time
from collections.abc import Sequence
from typing import BinaryIO

from llmkube.controllers.modelsource.cachefiles import (
    TEMP_PREFIX,
    TEMP_SUFFIX,
    place_canonically,
    remove_stale_temp_files,
    rename_no_replace,
)
from llmkube.controllers.modelsource.oserrors import describe, fetch_failure_for
from llmkube.kube.blocking import StopFlag, run_blocking
from llmkube.plan.model import LEGACY_BASENAME, FetchError, FetchFailure, StoredFile
from llmkube.plan.model.local_roots import msg_escapes_roots
from llmkube.plan.model.source import canonical_basename
from llmkube.sources import EscapesRoots, open_beneath_roots, read_gguf_metadata_or_none

CHUNK_SIZE = 8 * 1024 * 1024


def _failure(error: OSError, doing: str) -> FetchError:
    return FetchError(kind=fetch_failure_for(error), message=f"{doing}: {describe(error)}")


def _integrity_error(expected: str, actual: str) -> FetchError:
    return FetchError(
        kind=FetchFailure.INTEGRITY_MISMATCH, message=f"SHA256 mismatch: expected {expected}, got {actual}"
    )


def _sha_matches(expected: str | None, actual: str) -> bool:
    return not expected or expected.lower() == actual


class Pace:
    """Keeps a copy at or under `bytes_per_second` (None: as fast as the disks go), so that copying a
    70 GB model does not starve everything else on the node of disk bandwidth."""

    def __init__(self, bytes_per_second: float | None) -> None:
        self.bytes_per_second = bytes_per_second
        self._started = time.monotonic()

    def delay_after(self, total_bytes: int) -> float:
        """How long to wait once `total_bytes` are done to stay within the rate."""
        if not self.bytes_per_second:
            return 0.0
        return max(0.0, self._started + total_bytes / self.bytes_per_second - time.monotonic())


def _stream_copy(
    source: BinaryIO, target_descriptor: int, chunk_size: int, pace: Pace, stop: StopFlag
) -> tuple[int, str]:
    """Copy to the end of `source`, hashing on the way; returns (bytes copied, hex SHA-256).
    Raises StopRequested between two chunks once `stop` is set."""
    digest = hashlib.sha256()
    copied = 0
    with os.fdopen(target_descriptor, "wb") as target:
        while True:
            stop.check()
            chunk = source.read(chunk_size)
            if not chunk:
                break
            target.write(chunk)
            digest.update(chunk)
            copied += len(chunk)
            if delay := pace.delay_after(copied):
                stop.sleep(delay)
        target.flush()
        # Durable before it gets its final name: a crash must not leave a truncated model file.
        os.fsync(target.fileno())
    return copied, digest.hexdigest()


def _place_new_file(temp_path: str, model_dir: str, wanted: str) -> str | None:
    """Canonical name first, the legacy name if a concurrent writer already took it, else give up."""
    for basename in dict.fromkeys((wanted, LEGACY_BASENAME)):
        if rename_no_replace(temp_path, os.path.join(model_dir, basename)):
            return os.path.join(model_dir, basename)
    return None


def _remove_quietly(path: str) -> None:
    # Gone already (it was placed), or best effort: a hidden .tmp is never taken for a model file.
    with contextlib.suppress(OSError):
        os.unlink(path)


def open_local_source(source_path: str, roots: Sequence[str]) -> BinaryIO | FetchError:
    """The source, opened without following a link out of `roots` (see `confined`)."""
    try:
        descriptor = open_beneath_roots(source_path, roots)
    except EscapesRoots as error:
        return FetchError(FetchFailure.ESCAPES_ROOTS, msg_escapes_roots(source_path, roots, error.detail))
    except OSError as error:
        return _failure(error, f"failed to open local model file {source_path}")
    try:
        return os.fdopen(descriptor, "rb")
    except OSError as error:  # EISDIR: the path names a directory
        os.close(descriptor)
        return _failure(error, f"failed to open local model file {source_path}")


def copy_local_model_sync(
    source_path: str,
    model_dir: str,
    model_name: str,
    expected_sha256: str | None = None,
    *,
    roots: Sequence[str],
    chunk_size: int = CHUNK_SIZE,
    bytes_per_second: float | None = None,
    stop: StopFlag | None = None,
) -> StoredFile | FetchError:
    """Copy `source_path` (which must lie under one of `roots`) into `model_dir` under its canonical name.

    The bytes go to a temp file in the same directory (same filesystem, so the final rename is
    atomic), hashed while copied, size-checked against the source, checked against `spec.sha256`,
    then renamed to the canonical name without ever overwriting an existing file. On any failure,
    and when stopped (StopRequested), the temp file is removed: no partial file is ever visible
    under a `*.gguf` name. Temp files that a killed process left behind are swept first.
    """
    stop = stop or StopFlag()
    source = open_local_source(source_path, roots)
    if isinstance(source, FetchError):
        return source
    with source:
        try:
            source_stat = os.fstat(source.fileno())
        except OSError as error:
            return _failure(error, f"failed to stat local model file {source_path}")
        source_size = source_stat.st_size
        if not stat.S_ISREG(source_stat.st_mode):
            return FetchError(
                FetchFailure.NOT_A_FILE, f"local model source {source_path} is not a regular file"
            )
        try:
            os.makedirs(model_dir, exist_ok=True)
            remove_stale_temp_files(model_dir)
            # No new partial file once a stop is asked for: a copy retried during a shutdown would
            # otherwise create one the exiting process may not live to remove.
            stop.check()
            descriptor, temp_path = tempfile.mkstemp(dir=model_dir, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
        except OSError as error:
            return _failure(error, f"failed to create a file in the model cache {model_dir}")
        try:
            try:
                copied, sha256 = _stream_copy(source, descriptor, chunk_size, Pace(bytes_per_second), stop)
            except OSError as error:
                return _failure(error, f"failed to copy model file {source_path}")
            if copied != source_size:
                return FetchError(
                    FetchFailure.SIZE_MISMATCH, f"copy incomplete: expected {source_size} bytes, got {copied}"
                )
            if not _sha_matches(expected_sha256, sha256):
                return _integrity_error(expected_sha256 or "", sha256)
            metadata = read_gguf_metadata_or_none(temp_path)
            wanted = canonical_basename(model_name, metadata.model_name if metadata else None)
            try:
                final_path = _place_new_file(temp_path, model_dir, wanted)
            except OSError as error:
                return _failure(error, f"failed to move the copy into place in {model_dir}")
            if final_path is None:
                return FetchError(
                    FetchFailure.IO_ERROR,
                    f"{model_dir} already holds {wanted} and {LEGACY_BASENAME}; not overwriting either",
                )
            return StoredFile(
                path=final_path, size=copied, sha256=sha256, gguf=metadata, source_size=source_size
            )
        finally:
            _remove_quietly(temp_path)


def hash_file(path: str, *, chunk_size: int = CHUNK_SIZE, stop: StopFlag | None = None) -> str:
    """SHA-256 of a file; raises StopRequested between two chunks once `stop` is set."""
    stop = stop or StopFlag()
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while True:
            stop.check()
            chunk = file.read(chunk_size)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)


def verify_cached_file_sync(
    path: str,
    model_name: str,
    expected_sha256: str | None = None,
    *,
    hash_contents: bool = True,
    chunk_size: int = CHUNK_SIZE,
    stop: StopFlag | None = None,
) -> StoredFile | FetchError:
    """Describe a file already in the cache: size, SHA-256 (unless `hash_contents` is False), GGUF
    metadata, and move it to its canonical name when that name is free. A file whose hash differs
    from `spec.sha256` is deleted (INTEGRITY_MISMATCH): the planner then copies the source afresh.
    """
    try:
        size = os.stat(path).st_size
        sha256 = hash_file(path, chunk_size=chunk_size, stop=stop) if hash_contents else None
    except OSError as error:
        return _failure(error, f"failed to read cached model file {path}")
    if sha256 is not None and not _sha_matches(expected_sha256, sha256):
        try:
            os.unlink(path)
        except OSError as error:
            return _failure(error, f"failed to remove corrupt cached model file {path}")
        return _integrity_error(expected_sha256 or "", sha256)
    metadata = read_gguf_metadata_or_none(path)
    wanted = canonical_basename(model_name, metadata.model_name if metadata else None)
    try:
        final_path = place_canonically(path, wanted)
    except OSError:
        final_path = path  # keep serving it under its old name; the reference does the same
    return StoredFile(path=final_path, size=size, sha256=sha256, gguf=metadata)


async def copy_local_model(
    source_path: str,
    model_dir: str,
    model_name: str,
    expected_sha256: str | None = None,
    *,
    roots: Sequence[str],
    bytes_per_second: float | None = None,
    stop: StopFlag | None = None,
) -> StoredFile | FetchError:
    """The copy in a stoppable thread: cancelling the caller stops it and removes the partial
    file; `stop` (e.g. the controller's shutdown flag) stops it as well."""
    return await run_blocking(
        lambda flag: copy_local_model_sync(
            source_path,
            model_dir,
            model_name,
            expected_sha256,
            roots=roots,
            bytes_per_second=bytes_per_second,
            stop=flag,
        ),
        parent=stop,
        name="model-copy",
    )


async def verify_cached_file(
    path: str,
    model_name: str,
    expected_sha256: str | None = None,
    *,
    hash_contents: bool = True,
    stop: StopFlag | None = None,
) -> StoredFile | FetchError:
    return await run_blocking(
        lambda flag: verify_cached_file_sync(
            path, model_name, expected_sha256, hash_contents=hash_contents, stop=flag
        ),
        parent=stop,
        name="model-verify",
    )
