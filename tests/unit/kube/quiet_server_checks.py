"""The check both threaded servers (visibility API, dashboard) pass: `kube/http_serving.py`'s
QuietServer makes a client gone one debug line, and anything else an error, never
socketserver's traceback on stderr."""

from __future__ import annotations

import ssl
from typing import Any

import pytest
from structlog.testing import capture_logs

GONE_CLIENTS = (
    ssl.SSLEOFError(8, "EOF occurred in violation of protocol"),
    BrokenPipeError(32, "Broken pipe"),
    ConnectionResetError(104, "reset"),
)


def check_gone_clients_are_debug_lines(
    server: Any, what: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`server.handle_error` as socketserver calls it: inside the failed request's except."""
    with capture_logs() as logs:
        for gone in GONE_CLIENTS:
            try:
                raise gone
            except OSError:
                server.handle_error(None, ("127.0.0.1", 1))
        try:
            raise ValueError("a bug of ours")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 2))
    assert [(e["event"], e["log_level"]) for e in logs] == [
        (f"{what} client went away", "debug")] * len(GONE_CLIENTS) + [
        (f"{what} connection failed", "error")]
    assert "Traceback" not in capsys.readouterr().err
