"""How far the host agent lets one model download go: what it expects, where it stops, what it keeps.

Every byte of a download is the source's to choose, and the agent's host is someone's Mac or
workstation, not a pod with a volume of its own. So before a byte is written the answer's head
says how long the file is (`Content-Length`, or the total of `Content-Range` for a resumed
download), and the file has a limit it may never pass:

| limit | from |
|---|---|
| the length the answer announced | `Content-Length` / `Content-Range` |
| one file at most | `--max-model-bytes` (256 GiB by default) |
| the model's files together at most | the Model's `hardware.memoryBudget`, when it has one |
| the room on the cache's disk | its free bytes now, less a margin (64 MiB) kept free |

A file whose announced length passes a limit is refused before a byte is written; an answer
without a length is refused unless the Model declares its size (then the declared size is the
length it may reach). The stream is stopped the moment it passes its limit (the connection is
closed), and a body slower than `--download-min-speed` for `--download-min-speed-time` seconds is
cut, so a source can hold a download for at most `limit / min speed` seconds.

What is left on disk: a part cut short the way an honest network cuts it (the connection ended,
a timeout, too slow) is kept when a resumed request can continue it (a known length and an ETag
for `If-Range`); everything else (a body past its limit, a full disk, a checksum mismatch, an
answer refused) is deleted at once.
"""

import enum
import re
from dataclasses import dataclass

from llmkube.api.model import HardwareSpec
from llmkube.apimachinery.quantity import QuantityError, parse_quantity
from llmkube.plan.model.size import format_size

KIB, MIB, GIB = 1024, 1024**2, 1024**3
DEFAULT_MAX_FILE_BYTES = 256 * GIB
#: curl's --speed-limit/--speed-time, for a download: at least this many bytes a second...
DEFAULT_MIN_SPEED = 32 * KIB
#: ... over every stretch of this many seconds
DEFAULT_MIN_SPEED_TIME = 120.0
#: room kept free on the cache's disk beyond the file itself
DEFAULT_DISK_MARGIN = 64 * MIB
_DIGITS = re.compile(r"[0-9]{1,40}")  # ASCII digits only (int() also takes other scripts' digits)
_CONTENT_RANGE = re.compile(r"bytes ([0-9]{1,40})-([0-9]{1,40})/([0-9]{1,40}|\*)")


@dataclass(frozen=True)
class DownloadLimits:
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    min_speed: int = DEFAULT_MIN_SPEED  # bytes a second; 0: no floor
    min_speed_time: float = DEFAULT_MIN_SPEED_TIME
    disk_margin: int = DEFAULT_DISK_MARGIN


@dataclass(frozen=True)
class Declared:
    """What the Model says its files take at most, and how it says it."""

    bytes: int
    what: str


def declared_size(hardware: HardwareSpec | None) -> Declared | None:
    """The Model's hardware.memoryBudget: the server may not take more, so neither may the files
    it loads. (memoryFraction is a share of whatever host serves it, not a size.)"""
    if hardware is None or not hardware.memory_budget:
        return None
    try:
        value = int(parse_quantity(hardware.memory_budget).value)
    except QuantityError:
        return None
    if value <= 0:
        return None
    return Declared(value, f"its Model's hardware.memoryBudget ({hardware.memory_budget})")


def declared_left(declared: Declared | None, used: int) -> Declared | None:
    """What the declared size leaves for the next file, after `used` bytes of the Model's others."""
    if declared is None or used <= 0:
        return declared
    return Declared(
        max(0, declared.bytes - used), f"what {declared.what} leaves beside its other files ({used} bytes)"
    )


@dataclass(frozen=True)
class AnswerHead:
    """What a 200 or 206 answer's head says about its body."""

    status: int
    content_length: str | None = None
    content_range: str | None = None
    content_encoding: str | None = None


@dataclass(frozen=True)
class Body:
    start: int  # where in the file the body begins: 0, or the bytes already there (a resumed download)
    total: int | None  # the file's length, as the answer says it; None: it does not say


@dataclass(frozen=True)
class Refusal:
    message: str  # a sentence after the source's name


def read_head(head: AnswerHead, asked_from: int | None) -> Body | Refusal:
    """Where the body goes and how long the file is; `asked_from`: the offset a Range request
    asked from (None: the whole file was asked for)."""
    encoding = (head.content_encoding or "identity").strip().lower()
    if encoding != "identity":
        return Refusal(
            f"answered with Content-Encoding {encoding!r} although the file was asked for as it is "
            "(Accept-Encoding: identity): its length cannot be told"
        )
    length: int | None = None
    if head.content_length is not None:
        if not _DIGITS.fullmatch(head.content_length.strip()):
            return Refusal(f"answered a Content-Length that is no length ({head.content_length[:40]!r})")
        length = int(head.content_length.strip())
    if head.status == 200:
        return Body(0, length)
    if head.status != 206 or asked_from is None:
        return Refusal(f"answered HTTP {head.status} to a request for the whole file")
    match = _CONTENT_RANGE.fullmatch((head.content_range or "").strip())
    if match is None:
        return Refusal(f"answered HTTP 206 with Content-Range {(head.content_range or '')[:80]!r}")
    first, last = int(match[1]), int(match[2])
    total = None if match[3] == "*" else int(match[3])
    if first != asked_from or last < first:
        return Refusal(
            f"answered bytes {first}-{last} to a request for the bytes from {asked_from} on: a Range "
            "answer no file gives"
        )
    if total is not None and last != total - 1:
        return Refusal(f"answered bytes {first}-{last} of {total} to a request for the rest of the file")
    if length is not None and length != last - first + 1:
        return Refusal(f"answered bytes {first}-{last} with a Content-Length of {length}")
    return Body(first, last + 1)


@dataclass(frozen=True)
class Limit:
    bytes: int  # the file may not grow past this
    what: str  # what sets it, for the message


def file_limit(
    body: Body,
    declared: Declared | None,
    limits: DownloadLimits,
    free: int | None,
    *,
    source: str,
    cache_dir: str,
) -> Limit | Refusal:
    """The size the file may reach, or why it is not downloaded at all (`free`: the bytes free on
    the cache's disk now, None when that cannot be told)."""
    cap = Limit(limits.max_file_bytes, f"--max-model-bytes ({format_size(limits.max_file_bytes)})")
    if body.total is not None:
        total, rest = body.total, max(0, body.total - body.start)
        if total > cap.bytes:
            return Refusal(
                f"is {format_size(total)} ({total} bytes), more than this agent downloads for one file "
                f"({cap.what}): raise --max-model-bytes if it is meant to be that large"
            )
        if declared is not None and total > declared.bytes:
            return Refusal(
                f"is {format_size(total)} ({total} bytes), more than {declared.what}: {declared.bytes} "
                "bytes (the server could not load it within its budget)"
            )
        if free is not None and free < rest + limits.disk_margin:
            return Refusal(
                f"needs {format_size(rest)} more, and the model cache {cache_dir} has "
                f"{format_size(free)} free ({format_size(limits.disk_margin)} are kept free): free some "
                "room or point --model-cache-dir at a larger disk"
            )
        return Limit(total, f"the length it announced ({total} bytes)")
    if declared is None:
        return Refusal(
            "answered without a length (no Content-Length) and its Model declares no size: the agent "
            "does not download a file of unknown length. Declare the model's size with "
            "hardware.memoryBudget on the Model (the download then stops there), or serve the file "
            "with a Content-Length"
        )
    candidates = [cap, Limit(declared.bytes, declared.what)]
    if free is not None:
        room = body.start + max(0, free - limits.disk_margin)
        candidates.append(
            Limit(
                room,
                f"the room on the model cache's disk ({format_size(free)} free, "
                f"{format_size(limits.disk_margin)} kept free)",
            )
        )
    return min(candidates, key=lambda c: c.bytes)


def past_limit(done: int, limit: Limit) -> bool:
    return done > limit.bytes


def past_limit_message(source: str, done: int, limit: Limit) -> str:
    return (
        f"{source}: {done} bytes arrived, more than {limit.bytes}, past {limit.what}: the download "
        "was stopped and the partial file deleted"
    )


# -- the speed floor ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpeedWindow:
    """A stretch of the download that must bring `min_speed * min_speed_time` bytes in time."""

    started: float
    got: int = 0


def needed(limits: DownloadLimits) -> int:
    return int(limits.min_speed * limits.min_speed_time)


def deadline(window: SpeedWindow, limits: DownloadLimits) -> float:
    """When the window's bytes must have arrived (inf: no floor)."""
    if limits.min_speed <= 0 or limits.min_speed_time <= 0:
        return float("inf")
    return window.started + limits.min_speed_time


def advanced(window: SpeedWindow, now: float, count: int, limits: DownloadLimits) -> SpeedWindow:
    """The window after `count` bytes arrived at `now`: a new one once this one has its bytes."""
    got = window.got + count
    if got >= needed(limits):
        return SpeedWindow(now)
    return SpeedWindow(window.started, got)


def too_slow(window: SpeedWindow, now: float, limits: DownloadLimits) -> bool:
    return now >= deadline(window, limits) and window.got < needed(limits)


def too_slow_message(source: str, done: int, limits: DownloadLimits, *, kept: bool) -> str:
    left = "the part is kept and resumed next time" if kept else "the partial file deleted"
    return (
        f"{source}: fewer than {needed(limits)} bytes arrived in {limits.min_speed_time:g} s, slower "
        f"than {format_size(limits.min_speed)}/s (--download-min-speed): the download was cut after "
        f"{done} bytes, {left}"
    )


# -- what is left on disk -------------------------------------------------------------------------
class Ending(enum.Enum):
    COMPLETE = "complete"
    CUT_SHORT = "cut short"  # the connection ended early, a timeout, a network error
    TOO_SLOW = "too slow"
    PAST_LIMIT = "past its limit"
    DISK_FULL = "disk full"
    MISMATCH = "checksum mismatch"
    REFUSED = "refused"  # the answer's head refused before a byte


def keeps_partial(ending: Ending, *, resumable: bool) -> bool:
    """Whether the bytes written so far stay for the next attempt: only what an honest server's
    resumed answer continues (`resumable`: a known length and an ETag to ask If-Range with)."""
    return ending in (Ending.CUT_SHORT, Ending.TOO_SLOW) and resumable


def disk_full_message(
    source: str, cache_dir: str, *, reason: str, done: int, limit: Limit, margin: int, known: bool
) -> str:
    """`reason`: the system's words for the errno (No space left on device, Disk quota exceeded)."""
    rest = max(0, limit.bytes - done)
    missing = (
        f"{format_size(rest)} more for the rest of the file"
        if known
        else f"up to {format_size(rest)} more (the rest of {limit.what})"
    )
    return (
        f"the model cache {cache_dir} ran out of room ({reason}) after {done} bytes of {source}: it "
        f"needs {missing} and {format_size(margin)} kept free; the partial file is deleted: free some "
        "room or point --model-cache-dir at a larger disk"
    )
