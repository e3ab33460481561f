"""`status.size`: human binary units with one decimal, exactly as the reference operator prints them;
the same units in the messages that tell a size, and the way back to bytes for a status that holds
no exact count (written by the reference operator, or before the header reader counted the tensor
bytes)."""

_UNIT = 1024
_PREFIXES = "KMGTPE"
_POWERS = {"B": 0, **{f"{prefix}iB": power for power, prefix in enumerate(_PREFIXES, start=1)}}


def format_size(num_bytes: int) -> str:
    """`N B` under 1 KiB, else `4.6 GiB` / `1.0 KiB` (the reference's formatBytes)."""
    if num_bytes < _UNIT:
        return f"{num_bytes} B"
    divisor, exponent = _UNIT, 0
    remaining = num_bytes // _UNIT
    while remaining >= _UNIT:
        divisor *= _UNIT
        exponent += 1
        remaining //= _UNIT
    return f"{num_bytes / divisor:.1f} {_PREFIXES[exponent]}iB"


def parse_size(text: str | None) -> int | None:
    """A `format_size` text ("4.6 GiB", "512 B") back to bytes, to one decimal of its unit; None for
    anything else, `"0"` (a size the controller never saw) included."""
    if not text:
        return None
    number, _, unit = text.strip().partition(" ")
    try:
        value = float(number)
    except ValueError:
        return None
    if unit not in _POWERS or value <= 0:
        return None
    return int(value * _UNIT ** _POWERS[unit])
