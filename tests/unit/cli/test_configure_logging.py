"""`configure_logging` called twice in one process (the e2e tests start the controller in-process
once per test) must leave loggers cached under the first call reachable by the current chain."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from koordqueue.cli.run import configure_logging


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
