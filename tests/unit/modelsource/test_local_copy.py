"""Local copies into the controller cache, against the real filesystem."""

import asyncio
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from modelsource_support import GGUFFactory

from llmkube.controllers.modelsource import copy_local_model, copy_local_model_sync, verify_cached_file_sync
from llmkube.kube.blocking import StopFlag, StopRequested
from llmkube.plan.model import FetchError, FetchFailure, StoredFile


def roots_at(directory: Path) -> tuple[str, ...]:
    """Local sources under the test's own directory are allowed (--model-local-roots)."""
    return (str(directory),)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory)) if directory.exists() else []


async def test_copy_lands_under_the_canonical_name_with_hash_size_and_metadata(
    make_gguf: GGUFFactory, tmp_path: Path
) -> None:
    source = make_gguf(name="Tiny Llama 1B", vocabulary=500)
    cache = tmp_path / "cache" / "0123456789abcdef"
    result = await copy_local_model(
        str(source), str(cache), "my-model", sha256_of(source).upper(), roots=roots_at(tmp_path)
    )
    assert isinstance(result, StoredFile)
    assert result.path == str(cache / "Tiny-Llama-1B.gguf")
    assert (result.size, result.source_size) == (source.stat().st_size, source.stat().st_size)
    assert result.sha256 == sha256_of(source) == sha256_of(Path(result.path))  # the bytes, not just a hash
    assert result.gguf is not None and result.gguf.model_name == "Tiny Llama 1B"
    assert listing(cache) == ["Tiny-Llama-1B.gguf"]  # no temp file left behind


def test_a_file_that_is_not_gguf_is_named_after_the_model(tmp_path: Path) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"safetensors or whatever" * 100)
    result = copy_local_model_sync(str(source), str(tmp_path / "cache"), "my.model", roots=roots_at(tmp_path))
    assert isinstance(result, StoredFile)
    assert (Path(result.path).name, result.gguf) == ("my.model.gguf", None)


def test_sha256_mismatch_deletes_the_copy(make_gguf: GGUFFactory, tmp_path: Path) -> None:
    source = make_gguf()
    cache = tmp_path / "cache"
    result = copy_local_model_sync(str(source), str(cache), "m", "0" * 64, roots=roots_at(tmp_path))
    assert isinstance(result, FetchError)
    assert result.kind is FetchFailure.INTEGRITY_MISMATCH
    assert result.message == f"SHA256 mismatch: expected {'0' * 64}, got {sha256_of(source)}"
    assert listing(cache) == []


@pytest.mark.parametrize(
    ("relative_source", "kind"),
    [
        ("absent.gguf", FetchFailure.NOT_FOUND),
        ("absent-dir/m.gguf", FetchFailure.NOT_FOUND),
        (".", FetchFailure.NOT_A_FILE),  # a directory
    ],
)
def test_unusable_sources(tmp_path: Path, relative_source: str, kind: FetchFailure) -> None:
    source = tmp_path / relative_source
    cache = tmp_path / "cache"
    result = copy_local_model_sync(str(source), str(cache), "m", roots=roots_at(tmp_path))
    assert isinstance(result, FetchError)
    assert result.kind is kind
    assert result.message.startswith(f"failed to open local model file {source}: ")
    assert listing(cache) == []  # nothing created for a source that cannot be read


def test_device_files_are_not_models(tmp_path: Path) -> None:
    result = copy_local_model_sync("/dev/null", str(tmp_path / "cache"), "m", roots=("/dev",))
    assert isinstance(result, FetchError)
    assert (result.kind, result.message) == (
        FetchFailure.NOT_A_FILE,
        "local model source /dev/null is not a regular file",
    )


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs procfs")
def test_size_mismatch_leaves_no_partial_file(tmp_path: Path) -> None:
    # procfs reports size 0 for files that read as hundreds of bytes: a real source whose size lies.
    cache = tmp_path / "cache"
    result = copy_local_model_sync("/proc/self/status", str(cache), "m", roots=("/proc",))
    assert isinstance(result, FetchError)
    assert result.kind is FetchFailure.SIZE_MISMATCH
    assert result.message.startswith("copy incomplete: expected 0 bytes, got ")
    assert listing(cache) == []


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs procfs")
def test_read_error_mid_copy_leaves_no_partial_file(tmp_path: Path) -> None:
    # Reading our own address space at offset 0 opens fine and then fails with EIO.
    cache = tmp_path / "cache"
    result = copy_local_model_sync("/proc/self/mem", str(cache), "m", roots=("/proc",))
    assert isinstance(result, FetchError)
    assert result.kind is FetchFailure.IO_ERROR
    assert result.message == "failed to copy model file /proc/self/mem: Input/output error"
    assert listing(cache) == []


def test_cache_directory_that_cannot_be_created(make_gguf: GGUFFactory, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    result = copy_local_model_sync(str(make_gguf()), str(blocker / "cache"), "m", roots=roots_at(tmp_path))
    assert isinstance(result, FetchError)
    assert result.kind is FetchFailure.NOT_FOUND  # ENOTDIR
    assert result.message.startswith(f"failed to create a file in the model cache {blocker / 'cache'}")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads mode-000 files: the check is meaningless as root")
def test_permission_denied(make_gguf: GGUFFactory, tmp_path: Path) -> None:
    source = make_gguf()
    source.chmod(0)
    result = copy_local_model_sync(str(source), str(tmp_path / "cache"), "m", roots=roots_at(tmp_path))
    assert isinstance(result, FetchError)
    assert result.kind is FetchFailure.PERMISSION_DENIED
    assert listing(tmp_path / "cache") == []


# Run as root, then give up every capability (capset may always *reduce* one's own set), so the
# DAC check applies like in a container that drops capabilities: mode 000 really is unreadable.
DROP_CAPABILITIES_AND_COPY = """
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
header = struct.pack("II", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
if libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(bytes(24))) != 0:
    print("capset-failed"); sys.exit(0)
from llmkube.controllers.modelsource import copy_local_model_sync
result = copy_local_model_sync(sys.argv[1], sys.argv[2], "m", roots=(os.path.dirname(sys.argv[1]),))
print(result.kind.value, "|", result.message)
"""


@pytest.mark.skipif(os.geteuid() != 0 or sys.platform != "linux", reason="the unprivileged variant covers it")
def test_permission_denied_as_root_without_capabilities(make_gguf: GGUFFactory, tmp_path: Path) -> None:
    source = make_gguf()
    source.chmod(0)
    cache = tmp_path / "cache"
    completed = subprocess.run(
        [sys.executable, "-c", DROP_CAPABILITIES_AND_COPY, str(source), str(cache)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    if completed.stdout.strip() == "capset-failed":
        pytest.skip("cannot drop capabilities here")
    kind, message = completed.stdout.strip().split(" | ")
    assert kind == FetchFailure.PERMISSION_DENIED.value
    assert message == f"failed to open local model file {source}: Permission denied"
    assert listing(cache) == []


def test_canonical_rename_never_overwrites(make_gguf: GGUFFactory, tmp_path: Path) -> None:
    source = make_gguf(name="Tiny")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "Tiny.gguf").write_bytes(b"someone else's file")
    first = copy_local_model_sync(str(source), str(cache), "m", roots=roots_at(tmp_path))
    assert isinstance(first, StoredFile)
    assert first.path == str(cache / "model.gguf")  # the legacy name, since the canonical one is taken
    assert (cache / "Tiny.gguf").read_bytes() == b"someone else's file"
    second = copy_local_model_sync(str(source), str(cache), "m", roots=roots_at(tmp_path))
    assert isinstance(second, FetchError)
    assert second.kind is FetchFailure.IO_ERROR
    assert "not overwriting" in second.message
    assert listing(cache) == ["Tiny.gguf", "model.gguf"]  # both untouched, no temp file left
    assert (cache / "model.gguf").read_bytes() == source.read_bytes()


def test_verify_hashes_parses_and_renames_to_canonical(make_gguf: GGUFFactory, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    legacy = cache / "model.gguf"
    legacy.write_bytes(make_gguf(name="Tiny Llama").read_bytes())
    expected = sha256_of(legacy)
    result = verify_cached_file_sync(str(legacy), "m", expected.upper())
    assert isinstance(result, StoredFile)
    assert (result.path, result.sha256, result.size) == (
        str(cache / "Tiny-Llama.gguf"),
        expected,
        legacy.stat().st_size if legacy.exists() else result.size,
    )
    assert listing(cache) == ["Tiny-Llama.gguf"]
    assert result.gguf is not None and result.gguf.architecture == "llama"


def test_verify_without_hashing(make_gguf: GGUFFactory) -> None:
    path = make_gguf("Tiny-Llama.gguf", name="Tiny Llama")
    result = verify_cached_file_sync(str(path), "m", "f" * 64, hash_contents=False)
    assert isinstance(result, StoredFile)
    assert (result.path, result.sha256) == (str(path), None)  # nothing hashed, so nothing compared


def test_verify_deletes_a_corrupt_cached_file(make_gguf: GGUFFactory) -> None:
    path = make_gguf()
    result = verify_cached_file_sync(str(path), "m", "0" * 64)
    assert isinstance(result, FetchError)
    assert result.kind is FetchFailure.INTEGRITY_MISMATCH
    assert not path.exists()


def test_verify_a_vanished_file(tmp_path: Path) -> None:
    result = verify_cached_file_sync(str(tmp_path / "gone.gguf"), "m")
    assert isinstance(result, FetchError)
    assert result.kind is FetchFailure.NOT_FOUND
    assert (
        result.message
        == f"failed to read cached model file {tmp_path / 'gone.gguf'}: No such file or directory"
    )


# -- stopping a copy -----------------------------------------------------------------------------

SPARSE_SIZE = 512 * 1024 * 1024
SLOW = 64 * 1024 * 1024  # bytes per second: the sparse file takes 8 s to copy


def sparse_source(directory: Path) -> Path:
    source = directory / "big.gguf"
    with open(source, "wb") as file:
        file.truncate(SPARSE_SIZE)  # no disk blocks: the copy writes them
    return source


def temp_files(cache: Path) -> list[str]:
    return [name for name in listing(cache) if name.endswith(".tmp")]


async def wait_for_temp_file(cache: Path) -> None:
    async with asyncio.timeout(10):
        while not temp_files(cache):  # noqa: ASYNC110 - the copy thread has no event to wait for
            await asyncio.sleep(0.02)


async def test_a_cancelled_copy_stops_and_removes_its_partial_file(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "key"
    copy = asyncio.create_task(
        copy_local_model(
            str(sparse_source(tmp_path)), str(cache), "m", roots=roots_at(tmp_path), bytes_per_second=SLOW
        )
    )
    await wait_for_temp_file(cache)
    copy.cancel()  # a lost lease or a shutdown cancels the reconcile doing the copy
    with pytest.raises(asyncio.CancelledError):
        await copy
    # The copy itself stopped (not only the task awaiting it): nothing left, nothing growing.
    assert listing(cache) == []
    await asyncio.sleep(0.5)
    assert listing(cache) == []


def test_a_stopped_copy_raises_and_leaves_no_partial_file(tmp_path: Path) -> None:
    stop = StopFlag()
    stop.set()
    cache = tmp_path / "cache"
    with pytest.raises(StopRequested):
        copy_local_model_sync(
            str(sparse_source(tmp_path)), str(cache), "m", roots=roots_at(tmp_path), stop=stop
        )
    assert listing(cache) == []
    with pytest.raises(StopRequested):
        verify_cached_file_sync(str(sparse_source(tmp_path)), "m", stop=stop)


SHUTDOWN_SCRIPT = """
import asyncio, os, sys, time
from llmkube.controllers.modelsource import copy_local_model

source, cache, rate = sys.argv[1], sys.argv[2], float(sys.argv[3])

async def main():
    copy = asyncio.create_task(
        copy_local_model(source, cache, "m", roots=(os.path.dirname(source),), bytes_per_second=rate)
    )
    while not (os.path.isdir(cache) and any(name.endswith(".tmp") for name in os.listdir(cache))):
        await asyncio.sleep(0.02)
    copy.cancel()  # what the manager's shutdown does to an in-flight reconcile
    try:
        await copy
    except asyncio.CancelledError:
        pass
    print(time.monotonic(), flush=True)

asyncio.run(main())
"""


def test_the_process_exits_without_waiting_for_a_copy(tmp_path: Path) -> None:
    """asyncio.run used to join the copy thread at exit: a shutdown waited for the whole copy."""
    cache = tmp_path / "cache"
    process = subprocess.run(
        [sys.executable, "-c", SHUTDOWN_SCRIPT, str(sparse_source(tmp_path)), str(cache), str(SLOW)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    exit_delay = time.monotonic() - float(process.stdout.strip())
    assert exit_delay < 3.0, f"the process exited {exit_delay:.1f}s after its copy was cancelled"
    assert listing(cache) == []


def test_a_copy_asked_to_stop_before_it_starts_creates_no_file(
    tmp_path: Path, make_gguf: GGUFFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy retried while the process shuts down must not even create a partial file: the
    exiting process may not live to remove it (the SIGTERM-during-a-copy test found one left)."""
    created: list[str] = []
    real_mkstemp = tempfile.mkstemp

    def recording_mkstemp(*args: Any, **kwargs: Any) -> tuple[int, str]:
        descriptor, path = real_mkstemp(*args, **kwargs)
        created.append(path)
        return descriptor, path

    monkeypatch.setattr(tempfile, "mkstemp", recording_mkstemp)
    stop = StopFlag()
    stop.set()
    with pytest.raises(StopRequested):
        copy_local_model_sync(
            str(make_gguf()), str(tmp_path / "cache"), "m", roots=roots_at(tmp_path), stop=stop
        )
    assert created == []
