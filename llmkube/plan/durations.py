"""Go durations (time.ParseDuration, what metav1.Duration accepts): "15s", "1m30s", "250ms"."""

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds; ValueError for anything Go would refuse (or a sign: a negative wait means nothing)."""
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(text):
        part = _PART.match(text, position)
        if part is None:
            raise ValueError(f'"{text}" is not a duration (for example 30s, 2m, 500ms)')
        total += float(part.group(1)) * _UNITS[part.group(2)]
        position = part.end()
    if not text:
        raise ValueError('"" is not a duration (for example 30s, 2m, 500ms)')
    return total


def format_duration(seconds: float) -> str:
    """As Go prints short ones: 500ms, 15s, 2m0s."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:g}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:g}s"
