"""`configure_logging` called twice in one process (the e2e tests start the controller in-process
once per test) must leave loggers cached under the first call reachable by the current chain."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from koordqueue.cli.logs import configure_logging


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """configure_logging sets process-wide state: put structlog and the root logger back."""
    old = structlog.get_config()
    old_chain = list(old["processors"])
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    old["processors"][:] = old_chain
    structlog.configure(**old)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("restored_logging")
def test_a_logger_cached_before_a_second_configuration_is_still_captured() -> None:
    """Failed before the chain was replaced in place: the logger cached under the first call's
    list logged to stderr while capture_logs edited the second call's list (CI on 5119b54:
    test_podgroup_status's log lines missing after the e2e tests)."""
    configure_logging("console", "warning")
    log = structlog.get_logger("koordqueue.test_configure_logging")
    log.warning("cached on first use")
    configure_logging("json", "warning")
    with capture_logs() as logs:
        log.warning("after the second configuration")
    assert [e["event"] for e in logs] == ["after the second configuration"]


@pytest.mark.usefixtures("restored_logging")
def test_a_line_logged_after_stderr_was_swapped_goes_to_the_new_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host that replaces sys.stderr after configuring (pytest's capture between tests, an
    embedding process) and closes the old one: with the handler bound to the stream of its
    start the line was lost ('--- Logging error --- I/O operation on closed file', seen in a
    clean-clone CI's failing e2e test, where the scheduler's own log would have said why)."""
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging("json", "info")
    first.close()
    later = io.StringIO()
    monkeypatch.setattr(sys, "stderr", later)
    structlog.get_logger("koordqueue.test_configure_logging").warning("after the swap")
    logging.getLogger("kopf.test").warning("a foreign line")
    lines = [json.loads(line) for line in later.getvalue().splitlines()]
    assert [(e["event"], e["level"]) for e in lines] == [
        ("after the swap", "warning"), ("a foreign line", "warning")]


@pytest.mark.usefixtures("restored_logging")
def test_lines_under_the_level_are_dropped_and_the_rest_are_one_json_object_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    configure_logging("json", "info")
    log = structlog.get_logger("koordqueue.test_configure_logging")
    log.debug("not shown", unit="ns/a")
    log.info("admitted", unit="ns/a", path=("a", "root"), counts={1: 2})
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 1
    line = lines[0]
    assert (line["event"], line["level"], line["unit"]) == ("admitted", "info", "ns/a")
    assert line["path"] == ["a", "root"] and line["counts"] == {"1": 2}
    assert line["timestamp"].endswith("Z")


@pytest.mark.usefixtures("restored_logging")
def test_an_exception_logged_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the JSON line said only `"exc_info": true`: the traceback was lost."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    configure_logging("json", "info")
    try:
        raise ZeroDivisionError("the cause")
    except ZeroDivisionError:
        structlog.get_logger("koordqueue.test_configure_logging").exception("round failed")
    (line,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert line["level"] == "error" and "exc_info" not in line
    assert "Traceback" in line["exception"] and "ZeroDivisionError: the cause" in line["exception"]


@pytest.mark.usefixtures("restored_logging")
def test_our_lines_do_not_go_through_the_stdlib_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path: a structlog line is rendered and written without a LogRecord."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    configure_logging("json", "info")
    records: list[logging.LogRecord] = []

    class Seen(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            records.append(record)
            return True

    logging.getLogger().handlers[0].addFilter(Seen())
    structlog.get_logger("koordqueue.test_configure_logging").warning("ours")
    logging.getLogger("kopf.test").warning("foreign")
    assert [r.getMessage() for r in records] == ["foreign"]
