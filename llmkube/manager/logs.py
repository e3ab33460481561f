"""structlog configuration: JSON lines (orjson) by default, a console renderer on a TTY.

JSON lines use controller-runtime's keys for what every log tool looks for first: `ts` (ISO 8601,
UTC), `level`, `msg`; the object keys (`controller`, `namespace`, `name`, `reconcile_id`) follow."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog

__all__ = ["configure_logging"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


_LEADING = ("ts", "level", "msg")


def _leading_keys(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """ts, level and msg first, as controller-runtime prints them; the object keys after."""
    return {**{key: event[key] for key in _LEADING if key in event}, **event}


def configure_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Configure structlog (and route stdlib logging at WARNING+ to the same stream).

    Every record carries the context variables bound by the controller runner (controller,
    namespace, name, reconcile_id)."""
    stream = stream or sys.stderr
    numeric = _LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; use one of {sorted(_LEVELS)}")
    if fmt not in ("json", "console", "auto"):
        raise ValueError(f"unknown log format {fmt!r}; use json, console or auto")
    console = fmt == "console" or (fmt == "auto" and stream.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.StackInfoRenderer(),
    ]
    if console:
        processors = [
            *shared,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(),
        ]
        factory: Any = structlog.PrintLoggerFactory(stream)
    else:
        processors = [
            *shared,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
            structlog.processors.EventRenamer("msg"),
            _leading_keys,
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ]
        factory = structlog.BytesLoggerFactory(stream.buffer if hasattr(stream, "buffer") else None)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=stream, force=True)
