"""`status.size`: human binary units with one decimal, exactly as the reference operator prints them."""

_UNIT = 1024
_PREFIXES = "KMGTPE"


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


# Sources the workload (init container, runtime, metal-agent) fetches: the controller never sees the bytes.
RUNTIME_RESOLVED_SIZE = "0"
