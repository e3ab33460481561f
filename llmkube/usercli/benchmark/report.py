"""A benchmark run as a table, as JSON, and two runs compared (pure).

The JSON document (`-o json`) is what `--compare` reads back: its `version` says the layout, and
every figure is in plain units (seconds, per second) so other tools can read it too.
"""

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from llmkube.usercli.benchmark.stats import LevelResult, Percentiles

DOCUMENT_VERSION = "llmkube.dev/benchmark/v1"


class ReportError(ValueError):
    pass


@dataclass(frozen=True)
class RunSettings:
    target: str  # what was measured: the service (and how it was reached) or the URL
    url: str
    stream: bool
    prompt: str  # how prompts were made: "synthetic, ~128 tokens" or "prompts.txt (20 prompts)"
    max_tokens: int
    duration: float | None  # seconds per level, or
    requests: int | None  # requests per level


@dataclass(frozen=True)
class BenchmarkRun:
    settings: RunSettings
    levels: tuple[LevelResult, ...]
    started: str  # RFC 3339


def to_document(run: BenchmarkRun) -> dict[str, Any]:
    return {
        "version": DOCUMENT_VERSION,
        "started": run.started,
        "settings": asdict(run.settings),
        "levels": [asdict(level) for level in run.levels],
    }


def from_document(document: Any) -> BenchmarkRun:
    """The run a `-o json` document describes; ReportError names what is wrong with another file."""
    if not isinstance(document, Mapping) or document.get("version") != DOCUMENT_VERSION:
        raise ReportError(f"not an llmkube benchmark document (version {DOCUMENT_VERSION})")
    try:
        settings = RunSettings(**document["settings"])
        levels = tuple(_level(level) for level in document["levels"])
        return BenchmarkRun(settings=settings, levels=levels, started=str(document.get("started") or ""))
    except (KeyError, TypeError, ValueError) as error:
        raise ReportError(f"the benchmark document is incomplete: {error}") from None


def _level(data: Mapping[str, Any]) -> LevelResult:
    fields = dict(data)
    for name in ("ttft", "tpot", "latency"):
        fields[name] = Percentiles(**fields[name])
    fields["errors"] = {str(kind): int(count) for kind, count in fields["errors"].items()}
    return LevelResult(**fields)


def seconds_text(value: float | None) -> str:
    """212 ms under a second, 1.42 s above: latencies read at a glance."""
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _milliseconds(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def percentiles_text(p: Percentiles) -> str:
    """p50 / p90 / p99 in milliseconds."""
    return " / ".join(_milliseconds(v) for v in (p.p50, p.p90, p.p99))


def errors_text(errors: Mapping[str, int]) -> str:
    total = sum(errors.values())
    if not total:
        return "0"
    return f"{total} (" + ", ".join(f"{kind}: {count}" for kind, count in errors.items()) + ")"


LEVEL_HEADERS = (
    "CONCURRENCY",
    "REQUESTS",
    "REQ/S",
    "OUTPUT TOK/S",
    "TTFT P50/P90/P99 (ms)",
    "TPOT P50/P90/P99 (ms)",
    "LATENCY P50",
    "ERRORS",
)


def level_rows(levels: Sequence[LevelResult]) -> list[tuple[str, ...]]:
    return [
        (
            str(level.concurrency),
            str(level.requests),
            f"{level.requests_per_second:.2f}",
            f"{level.output_tokens_per_second:.1f}",
            percentiles_text(level.ttft),
            percentiles_text(level.tpot),
            seconds_text(level.latency.p50),
            errors_text(level.errors),
        )
        for level in levels
    ]


def summary_lines(run: BenchmarkRun) -> list[str]:
    settings = run.settings
    amount = (
        f"{settings.duration:g} s per level"
        if settings.duration is not None
        else f"{settings.requests} requests per level"
    )
    stream = "streamed" if settings.stream else "not streamed"
    return [
        f"Target: {settings.target}",
        f"Requests: {settings.prompt}, up to {settings.max_tokens} output tokens, {stream}, {amount}",
    ]


COMPARE_HEADERS = ("CONCURRENCY", "REQ/S", "OUTPUT TOK/S", "TTFT P50", "TPOT P50", "ERRORS")


def _change(old: float | None, new: float | None, text: Any) -> str:
    if old is None or new is None:
        return f"{text(old)} -> {text(new)}"
    ratio = f" ({new / old:.2f}x)" if old > 0 else ""
    return f"{text(old)} -> {text(new)}{ratio}"


def compare_rows(old: BenchmarkRun, new: BenchmarkRun) -> list[tuple[str, ...]]:
    """One row per concurrency level measured in both runs: old -> new, and new/old as a ratio."""
    before = {level.concurrency: level for level in old.levels}
    rows: list[tuple[str, ...]] = []
    for level in new.levels:
        was = before.get(level.concurrency)
        if was is None:
            continue
        rows.append(
            (
                str(level.concurrency),
                _change(was.requests_per_second, level.requests_per_second, lambda v: f"{v:.2f}"),
                _change(was.output_tokens_per_second, level.output_tokens_per_second, lambda v: f"{v:.1f}"),
                _change(was.ttft.p50, level.ttft.p50, seconds_text),
                _change(was.tpot.p50, level.tpot.p50, seconds_text),
                f"{was.failed} -> {level.failed}",
            )
        )
    return rows
