"""structlog configuration: JSON lines (orjson) by default, a console renderer on a TTY.

JSON lines use controller-runtime's keys for what every log tool looks for first: `ts` (ISO 8601,
UTC), `level`, `msg`; then `logger` (the name given to `structlog.get_logger`, zap's logger name)
and the object keys (`controller`, `controllerKind`, `namespace`, `name`, `reconcileID`)."""

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


class _NamedLogger:
    """The logger a factory made, with the name it was asked for (the `logger` key)."""

    def __init__(self, inner: Any, name: str) -> None:
        self._inner = inner
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)


class _NamingFactory:
    def __init__(self, factory: Any) -> None:
        self._factory = factory

    def __call__(self, *args: Any) -> Any:
        logger = self._factory()
        return _NamedLogger(logger, str(args[0])) if args and args[0] else logger


def _logger_name(logger: Any, _: str, event: dict[str, Any]) -> dict[str, Any]:
    name = getattr(logger, "name", None)
    if isinstance(name, str) and name:
        event.setdefault("logger", name)
    return event


def configure_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Configure structlog (and route stdlib logging at WARNING+ to the same stream).

    Every record carries the context variables bound by the controller runner (controller,
    controllerKind, namespace, name, reconcileID)."""
    stream = stream or sys.stderr
    numeric = _LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; use one of {sorted(_LEVELS)}")
    if fmt not in ("json", "console", "auto"):
        raise ValueError(f"unknown log format {fmt!r}; use json, console or auto")
    console = fmt == "console" or (fmt == "auto" and stream.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        _logger_name,
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
        logger_factory=_NamingFactory(factory),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=stream, force=True)
