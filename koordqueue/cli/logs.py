"""Process logging: structlog for our lines, the stdlib's (kopf, urllib3) through the same renderer.

Our own lines skip the stdlib `logging` machinery (LogRecord, handler lock, formatter) and are
rendered with orjson: under a burst `koordqueue run` logs two lines per admitted Job, and
py-spy put ~10 % of the controller's GIL samples in that path (bench/HISTORY.md, issue 36);
one line cost 25 us through the stdlib and 6 us here. Lines below the level are dropped by the
chain's first processor, before anything is rendered. An exception logged with
`log.exception` keeps its traceback (`exception` in the JSON; before, only `exc_info: true`).
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any, TextIO

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger


def configure_logging(fmt: str, level: str) -> None:
    """Our lines and the stdlib's (kopf, urllib3), JSON (`fmt` json) or console, on stderr."""
    renderer: Processor = (
        structlog.processors.JSONRenderer(serializer=_dumps)
        if fmt == "json" else structlog.dev.ConsoleRenderer()
    )  # fmt: skip
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    threshold = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    traces: list[Processor] = (
        [structlog.processors.format_exc_info] if fmt == "json" else []
    )  # (the console renderer prints tracebacks itself)
    # the chain is replaced in place: a logger cached on first use keeps the list it was built
    # with, so a second call (the e2e tests start the controller in-process again and again)
    # would leave every cached logger on a chain nothing reaches any more (capture_logs missed it)
    processors = structlog.get_config()["processors"]
    processors[:] = [_DropBelow(threshold), *shared, *traces, renderer]
    structlog.configure(
        processors=processors,
        logger_factory=_stderr_logger,
        wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET),
        cache_logger_on_first_use=True,
    )
    handler = CurrentStderrHandler()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf logs every handler success at info (several lines per Job): keep it for debug only
    logging.getLogger("kopf").setLevel("DEBUG" if level == "debug" else "WARNING")
    logging.getLogger("kubernetes").setLevel("WARNING")
    logging.getLogger("urllib3").setLevel("WARNING")


def _dumps(obj: Any, **kw: Any) -> str:
    return orjson.dumps(obj, default=kw.get("default"), option=orjson.OPT_NON_STR_KEYS).decode()


class _DropBelow:
    """The chain's first processor: a line under the configured level goes no further."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold

    def __call__(self, _logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        if _LEVELS.get(method, logging.INFO) < self.threshold:
            raise structlog.DropEvent
        return event


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "msg": logging.INFO,
           "warning": logging.WARNING, "warn": logging.WARNING, "error": logging.ERROR,
           "exception": logging.ERROR, "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


class _StderrLogger:
    """Writes each rendered line to whatever `sys.stderr` is at the call (as
    CurrentStderrHandler does for the stdlib's lines), one whole line per write."""

    _lock = threading.Lock()

    def msg(self, message: str) -> None:
        with self._lock:
            stream = sys.stderr
            stream.write(message + "\n")
            stream.flush()

    debug = info = warning = warn = error = exception = critical = fatal = log = msg


_STDERR = _StderrLogger()


def _stderr_logger(*_args: Any) -> _StderrLogger:
    return _STDERR


class CurrentStderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is when a record is emitted, not when configured: a
    host that swaps stderr (pytest's capture, an embedding process) after start-up would
    otherwise leave every later line on a closed stream ('I/O operation on closed file')."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass  # (StreamHandler's own __init__ / setStream: the current stderr wins)
