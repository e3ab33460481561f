"""What the host agent lets one download do (plan/agent/download.py): the length an answer's head
announces, the limit the file may reach (--max-model-bytes, the Model's declared size, the disk's
room), the speed floor, and what is left on disk when it stops."""

import pytest

from llmkube.api.model import HardwareSpec
from llmkube.plan.agent.download import (
    GIB,
    MIB,
    AnswerHead,
    Body,
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
    needed,
    past_limit,
    past_limit_message,
    read_head,
    too_slow,
    too_slow_message,
)

URL = "https://models.example/m.gguf"
LIMITS = DownloadLimits(max_file_bytes=10 * GIB, min_speed=100, min_speed_time=10.0, disk_margin=64 * MIB)


# -- the answer's head --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("head", "asked_from", "expected"),
    [
        (AnswerHead(200, "1000"), None, Body(0, 1000)),
        (AnswerHead(200), None, Body(0, None)),  # chunked, or until the connection closes
        (AnswerHead(200, "1000"), 400, Body(0, 1000)),  # a resume answered whole: start again
        (AnswerHead(206, "600", "bytes 400-999/1000"), 400, Body(400, 1000)),
        (AnswerHead(206, None, "bytes 400-999/1000"), 400, Body(400, 1000)),
        (AnswerHead(206, "600", "bytes 400-999/*"), 400, Body(400, 1000)),
        (AnswerHead(200, "1000", content_encoding="identity"), None, Body(0, 1000)),
        (AnswerHead(200, " 1000 "), None, Body(0, 1000)),
        # A length beyond any disk is a length (the limit refuses it, with its size).
        (AnswerHead(200, "9" * 30), None, Body(0, int("9" * 30))),
    ],
)
def test_an_answer_says_where_its_body_goes_and_how_long_the_file_is(
    head: AnswerHead, asked_from: int | None, expected: Body
) -> None:
    assert read_head(head, asked_from) == expected


@pytest.mark.parametrize(
    ("head", "asked_from", "words"),
    [
        (AnswerHead(206, "1000", "bytes 0-999/1000"), 400, "a Range answer no file gives"),
        (AnswerHead(206, "100", "bytes 400-499/1000"), 400, "to a request for the rest of the file"),
        (AnswerHead(206, "10", "bytes 400-999/1000"), 400, "with a Content-Length of 10"),
        (AnswerHead(206, "600", "bytes 400-999/1000"), None, "to a request for the whole file"),
        (AnswerHead(206, "600", "bytes=400-999/1000"), 400, "Content-Range"),
        (AnswerHead(206, "600", None), 400, "Content-Range"),
        (AnswerHead(206, "1", "bytes 999-400/1000"), 999, "a Range answer no file gives"),
        (AnswerHead(200, "abc"), None, "no length"),
        (AnswerHead(200, "-1"), None, "no length"),
        (AnswerHead(200, "1e9"), None, "no length"),
        (AnswerHead(200, "\u0663\u0660"), None, "no length"),  # digits of another script: int() takes them
        (AnswerHead(200, "9" * 41), None, "no length"),
        (AnswerHead(200, "1000", content_encoding="gzip"), None, "Content-Encoding 'gzip'"),
        (AnswerHead(200, "1000", content_encoding="br"), None, "its length cannot be told"),
    ],
)
def test_an_answer_no_file_gives_is_refused(head: AnswerHead, asked_from: int | None, words: str) -> None:
    refusal = read_head(head, asked_from)
    assert isinstance(refusal, Refusal) and words in refusal.message, refusal


# -- the limit --------------------------------------------------------------------------------
BUDGET = Declared(8 * GIB, "its Model's hardware.memoryBudget (8Gi)")


@pytest.mark.parametrize(
    ("body", "declared", "free", "expected"),
    [
        (Body(0, 1000), None, None, Limit(1000, "the length it announced (1000 bytes)")),
        (Body(0, 1000), BUDGET, 100 * GIB, Limit(1000, "the length it announced (1000 bytes)")),
        # Resumed: only the rest needs room.
        (Body(900, 1000), None, 100 + 64 * MIB, Limit(1000, "the length it announced (1000 bytes)")),
        (Body(0, 10 * GIB), None, None, Limit(10 * GIB, "the length it announced (10737418240 bytes)")),
        # No length: the declared size, the cap or the disk's room, whichever is least.
        (Body(0, None), BUDGET, None, Limit(8 * GIB, BUDGET.what)),
        (Body(0, None), Declared(20 * GIB, "x"), None, Limit(10 * GIB, "--max-model-bytes (10.0 GiB)")),
        (
            Body(0, None),
            BUDGET,
            GIB + 64 * MIB,
            Limit(GIB, "the room on the model cache's disk (1.1 GiB free, 64.0 MiB kept free)"),
        ),
        (
            Body(0, None),
            BUDGET,
            10 * MIB,
            Limit(0, "the room on the model cache's disk (10.0 MiB free, 64.0 MiB kept free)"),
        ),
    ],
)
def test_the_limit_a_file_may_reach(
    body: Body, declared: Declared | None, free: int | None, expected: Limit
) -> None:
    assert file_limit(body, declared, LIMITS, free, source=URL, cache_dir="/c") == expected


@pytest.mark.parametrize(
    ("body", "declared", "free", "words"),
    [
        (Body(0, 10 * GIB + 1), None, None, "more than this agent downloads for one file (--max-model-bytes"),
        (Body(0, 9 * GIB), BUDGET, None, "than its Model's hardware.memoryBudget (8Gi): 8589934592 bytes"),
        (Body(900, 9 * GIB), BUDGET, None, "(9663676416 bytes)"),  # the whole file counts, not the rest
        (Body(0, 1000), None, 1000 + 64 * MIB - 1, "the model cache /c has 64.0 MiB free"),
        (Body(900, 1000), None, 99 + 64 * MIB, "needs 100 B more"),
        (Body(0, None), None, None, "answered without a length (no Content-Length)"),
        (Body(0, None), None, 100 * GIB, "hardware.memoryBudget"),  # says what to declare
    ],
)
def test_a_file_past_a_limit_is_refused_before_a_byte(
    body: Body, declared: Declared | None, free: int | None, words: str
) -> None:
    refusal = file_limit(body, declared, LIMITS, free, source=URL, cache_dir="/c")
    assert isinstance(refusal, Refusal) and words in refusal.message, refusal


@pytest.mark.parametrize(
    ("hardware", "expected"),
    [
        (None, None),
        (HardwareSpec(), None),
        (HardwareSpec(memory_budget="8Gi"), Declared(8 * GIB, "its Model's hardware.memoryBudget (8Gi)")),
        (
            HardwareSpec(memory_budget="500M"),
            Declared(500_000_000, "its Model's hardware.memoryBudget (500M)"),
        ),
        (HardwareSpec(memory_budget="lots"), None),  # the API server's validation says so, not this
        (HardwareSpec(memory_budget="0"), None),
        (HardwareSpec(memory_fraction=0.5), None),  # a share of whichever host serves it: no size
    ],
)
def test_what_a_model_declares_about_its_size(
    hardware: HardwareSpec | None, expected: Declared | None
) -> None:
    assert declared_size(hardware) == expected


def test_the_declared_size_covers_the_model_s_files_together() -> None:
    assert declared_left(BUDGET, 0) is BUDGET
    assert declared_left(None, 100) is None
    left = declared_left(BUDGET, 3 * GIB)
    assert left is not None and left.bytes == 5 * GIB
    assert left.what == f"what {BUDGET.what} leaves beside its other files (3221225472 bytes)"
    spent = declared_left(BUDGET, 9 * GIB)
    assert spent is not None and spent.bytes == 0


@pytest.mark.parametrize(
    ("done", "limit", "past"),
    [(999, 1000, False), (1000, 1000, False), (1001, 1000, True), (1, 0, True), (0, 0, False)],
)
def test_a_download_stops_the_moment_it_passes_its_limit(done: int, limit: int, past: bool) -> None:
    assert past_limit(done, Limit(limit, "x")) is past


def test_the_stop_names_the_source_the_bytes_and_the_limit() -> None:
    message = past_limit_message(URL, 1_048_577, Limit(1_048_576, "the length it announced (1048576 bytes)"))
    assert message.startswith(URL)
    assert "1048577 bytes arrived, more than 1048576, past the length it announced" in message
    assert "partial file deleted" in message


# -- the speed floor: 100 bytes a second over every 10 s (1000 bytes a window) --------------------
def replay(events: list[tuple[float, int]]) -> SpeedWindow:
    window = SpeedWindow(0.0)
    for now, count in events:
        window = advanced(window, now, count, LIMITS)
    return window


@pytest.mark.parametrize(
    ("events", "now", "slow", "next_deadline"),
    [
        ([], 9.9, False, 10.0),
        ([], 10.0, True, 10.0),  # nothing at all in the window
        ([(5.0, 999)], 10.0, True, 10.0),  # one byte short
        ([(5.0, 1000)], 10.0, False, 15.0),  # its bytes in time: a new window from then
        ([(5.0, 600), (9.0, 400)], 18.9, False, 19.0),
        ([(5.0, 600), (9.0, 400)], 19.0, True, 19.0),
        # A trickle: a byte a second keeps no window alive, however long it goes on.
        ([(float(t), 1) for t in range(1, 10)], 10.0, True, 10.0),
        # A burst then silence: the burst opens a window the silence then fails.
        ([(1.0, 10_000)], 10.5, False, 11.0),
        ([(1.0, 10_000)], 11.0, True, 11.0),
    ],
)
def test_a_body_slower_than_the_floor_for_too_long_is_cut(
    events: list[tuple[float, int]], now: float, slow: bool, next_deadline: float
) -> None:
    window = replay(events)
    assert too_slow(window, now, LIMITS) is slow
    assert deadline(window, LIMITS) == next_deadline


def test_no_floor_never_cuts() -> None:
    off = DownloadLimits(min_speed=0)
    assert deadline(SpeedWindow(0.0), off) == float("inf")
    assert not too_slow(SpeedWindow(0.0), 1e12, off)
    assert needed(LIMITS) == 1000


def test_the_cut_says_the_floor_and_what_is_left() -> None:
    kept = too_slow_message(URL, 5000, LIMITS, kept=True)
    assert "fewer than 1000 bytes arrived in 10 s" in kept and "--download-min-speed" in kept
    assert "cut after 5000 bytes, the part is kept" in kept
    assert "partial file deleted" in too_slow_message(URL, 5000, LIMITS, kept=False)


# -- what is left on disk -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ending", "resumable", "kept"),
    [
        (Ending.CUT_SHORT, True, True),
        (Ending.TOO_SLOW, True, True),
        (Ending.CUT_SHORT, False, False),  # nothing a resumed request could continue
        (Ending.TOO_SLOW, False, False),
        (Ending.PAST_LIMIT, True, False),
        (Ending.DISK_FULL, True, False),
        (Ending.MISMATCH, True, False),
        (Ending.REFUSED, True, False),
        (Ending.COMPLETE, True, False),  # renamed into place: no partial file left
    ],
)
def test_only_an_honest_cut_keeps_its_part(ending: Ending, resumable: bool, kept: bool) -> None:
    assert keeps_partial(ending, resumable=resumable) is kept


def test_a_full_disk_says_how_much_room_was_missing() -> None:
    known = disk_full_message(
        URL,
        "/c",
        reason="No space left on device",
        done=6 * MIB,
        limit=Limit(16 * MIB, "the length it announced (16777216 bytes)"),
        margin=64 * MIB,
        known=True,
    )
    assert known.startswith(
        "the model cache /c ran out of room (No space left on device) after 6291456 bytes"
    )
    assert "needs 10.0 MiB more for the rest of the file and 64.0 MiB kept free" in known
    assert "the partial file is deleted" in known
    unknown = disk_full_message(
        URL,
        "/c",
        reason="Disk quota exceeded",
        done=6 * MIB,
        limit=Limit(16 * MIB, "its Model's hardware.memoryBudget (16Mi)"),
        margin=64 * MIB,
        known=False,
    )
    assert "(Disk quota exceeded)" in unknown
    assert "up to 10.0 MiB more (the rest of its Model's hardware.memoryBudget (16Mi))" in unknown
