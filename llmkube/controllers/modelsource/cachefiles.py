"""The files of one Model in the controller cache `<cache>/<cacheKey>/`, the reference operator's layout."""

import contextlib
import errno
import os
import time

from llmkube.plan.model import LEGACY_BASENAME, CachedFile

MODEL_SUFFIX = ".gguf"
# A copy in flight: `<model_dir>/.model-XXXXXXXX.tmp`, renamed to its `*.gguf` name when complete.
TEMP_PREFIX = ".model-"
TEMP_SUFFIX = ".tmp"
# A copy in flight writes its temp file every chunk (8 MiB); one untouched this long belongs to a
# process that died mid-copy (SIGKILL, OOM, node failure) and would hold its gigabytes for ever.
STALE_TEMP_SECONDS = 600.0

# Filesystems without hard links answer link() with one of these; fall back to check-then-rename.
_NO_HARD_LINKS = frozenset(
    {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}
)


def _model_files(model_dir: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(model_dir) as entries:
            return sorted(
                (
                    entry
                    for entry in entries
                    # Hidden names are ours in flight (temp copies) or the init container's ETag markers.
                    if entry.name.endswith(MODEL_SUFFIX)
                    and not entry.name.startswith(".")
                    and entry.is_file(follow_symlinks=False)
                ),
                key=lambda entry: entry.name,
            )
    except (FileNotFoundError, NotADirectoryError):
        return []


def find_cached_file(model_dir: str, preferred_basename: str) -> CachedFile | None:
    """The `*.gguf` serving this Model: the canonical name if present, else the lexicographically
    first other name, else the legacy `model.gguf`. None when the directory holds none (or is
    unreadable: the copy that follows will report why).
    """
    try:
        files = _model_files(model_dir)
    except OSError:
        return None
    if not files:
        return None
    names = [entry.name for entry in files]
    if preferred_basename in names:
        pick = files[names.index(preferred_basename)]
    else:
        pick = next((entry for entry in files if entry.name != LEGACY_BASENAME), files[0])
    try:
        size = pick.stat(follow_symlinks=False).st_size
    except OSError:
        return None  # removed since the listing: as good as absent
    return CachedFile(path=os.path.join(model_dir, pick.name), size=size)


def remove_cached_files(model_dir: str) -> list[str]:
    """Delete every cached `*.gguf` of this Model (before a re-fetch); returns what was removed."""
    removed = []
    for entry in _model_files(model_dir):
        path = os.path.join(model_dir, entry.name)
        try:
            os.remove(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def rename_no_replace(source: str, target: str) -> bool:
    """Rename `source` to `target` unless `target` exists; never overwrites. False when it exists.

    A hard link plus unlink is atomic against a concurrent writer of `target` (link fails with
    EEXIST); where hard links are unsupported, a check-then-rename is the best POSIX offers.
    """
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(target):
            return False
        os.rename(source, target)
        return True
    os.unlink(source)
    return True


def place_canonically(path: str, canonical_basename: str) -> str:
    """Give a cached file its canonical name if that name is free; returns where the file now is."""
    directory, basename = os.path.split(path)
    if basename == canonical_basename:
        return path
    target = os.path.join(directory, canonical_basename)
    return target if rename_no_replace(path, target) else path


def remove_stale_temp_files(model_dir: str, older_than: float = STALE_TEMP_SECONDS) -> list[str]:
    """Delete temp copies nobody has written to for `older_than` seconds; returns what was removed.
    A fresh one may be another worker's copy in flight (two Models sharing a cache key): kept."""
    removed = []
    cutoff = time.time() - older_than
    try:
        with os.scandir(model_dir) as entries:
            stale = [
                entry.path
                for entry in entries
                if entry.name.startswith(TEMP_PREFIX)
                and entry.name.endswith(TEMP_SUFFIX)
                and entry.is_file(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_mtime < cutoff
            ]
    except OSError:
        return []
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
            removed.append(path)
    return removed
