"""Reading a server's command line: whether the user's arguments already hold a flag (theirs win)."""

from collections.abc import Sequence


def has_flag(args: Sequence[str], *flags: str) -> bool:
    """True when `args` holds one of `flags` as `--flag` or `--flag=value` (user flags win over ours)."""
    return any(arg == flag or arg.startswith(f"{flag}=") for arg in args for flag in flags)
