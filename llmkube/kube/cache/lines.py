"""Split a watch response (newline-delimited JSON) into lines, whatever their length.

aiohttp's ``readline`` refuses lines over its buffer's high-water mark (the "Line is too long"
failures on 43 KB Secrets: https://github.com/nolar/kopf/issues/275,
https://github.com/aio-libs/aiohttp/issues/4453); here chunks are joined only when a line spans
several of them, with an explicit upper bound instead of an accidental one.
"""

from __future__ import annotations

__all__ = ["LineSplitter", "LineTooLong"]

#: etcd rejects values over ~1.5 MiB; JSON escaping can inflate that, so allow generous headroom.
DEFAULT_MAX_LINE = 64 * 1024 * 1024


class LineTooLong(Exception):
    pass


class LineSplitter:
    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self._max_line = max_line
        self._parts: list[bytes] = []
        self._pending = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """Return the complete, non-blank lines finished by ``chunk`` (without the newline)."""
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            if self._parts:
                self._parts.append(piece)
                piece = b"".join(self._parts)
                self._parts.clear()
                self._pending = 0
            if piece.strip():
                lines.append(piece)
            start = end + 1
        if start < len(chunk):
            rest = chunk[start:]
            self._pending += len(rest)
            if self._pending > self._max_line:
                raise LineTooLong(f"a watch line exceeds {self._max_line} bytes")
            self._parts.append(rest)
        return lines

    def flush(self) -> bytes | None:
        """What is left when the stream ends without a final newline."""
        if not self._parts:
            return None
        rest = b"".join(self._parts)
        self._parts.clear()
        self._pending = 0
        return rest if rest.strip() else None
