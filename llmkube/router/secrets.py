"""The Secrets a ModelRouter names, as the kubelet mounts them into the router's pod: one directory
per Secret, one file per key. Read again when the kubelet updates them (a rotated key is used
within seconds, no restart), at most once a second per file; never logged.

* provider keys: `<root>/credentials/<secret>/<KEY>` (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...);
* client keys: `<root>/api-keys/<secret>/<client>`: each key of the Secret names a client, its
  value is that client's key (compared in constant time)."""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ApiKeys", "SecretFiles"]

_RECHECK_SECONDS = 1.0
_MAX_KEY_BYTES = 64 << 10


@dataclass
class _Cached:
    value: str | None
    mtime: float | None
    checked: float


def _read(path: Path) -> tuple[str | None, float | None]:
    try:
        stat = path.stat()
        if stat.st_size > _MAX_KEY_BYTES:
            return None, stat.st_mtime
        return path.read_text().strip() or None, stat.st_mtime
    except (OSError, UnicodeDecodeError):
        return None, None


class SecretFiles:
    def __init__(self, root: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self._clock = clock
        self._cache: dict[Path, _Cached] = {}

    def value(self, secret: str, key: str) -> str | None:
        path = self.root / secret / key
        now = self._clock()
        cached = self._cache.get(path)
        if cached is not None and now - cached.checked < _RECHECK_SECONDS:
            return cached.value
        try:
            mtime: float | None = path.stat().st_mtime
        except OSError:
            mtime = None
        if cached is not None and mtime == cached.mtime:
            cached.checked = now
            return cached.value
        value, mtime = _read(path)
        self._cache[path] = _Cached(value, mtime, now)
        return value


class ApiKeys:
    """The client keys of one Secret, reloaded when its files change."""

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self._clock = clock
        self._checked = float("-inf")
        self._stamp: tuple[tuple[str, float], ...] | None = None
        self._keys: list[tuple[str, bytes]] = []

    def _stamp_now(self) -> tuple[tuple[str, float], ...]:
        try:
            entries = sorted(e for e in os.listdir(self.root) if not e.startswith("."))
        except OSError:
            return ()
        found = []
        for entry in entries:
            try:
                found.append((entry, (self.root / entry).stat().st_mtime))
            except OSError:
                continue
        return tuple(found)

    def _refresh(self) -> None:
        now = self._clock()
        if now - self._checked < _RECHECK_SECONDS:
            return
        self._checked = now
        stamp = self._stamp_now()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        keys = []
        for name, _ in stamp:
            value, _mtime = _read(self.root / name)
            if value:
                keys.append((name, value.encode()))
        self._keys = keys

    def count(self) -> int:
        self._refresh()
        return len(self._keys)

    def client(self, presented: str) -> str | None:
        """The client the key belongs to, or None. Every key is compared (constant time each), so
        the time taken does not tell which key came closest."""
        self._refresh()
        given = presented.encode()
        found = None
        for name, key in self._keys:
            if hmac.compare_digest(given, key) and found is None:
                found = name
        return found
