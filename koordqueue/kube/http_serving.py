"""The threaded HTTP servers we run (visibility API, dashboard): a client gone is not an error.

socketserver's default `handle_error` prints a traceback on stderr for every connection that
fails while its answer is written. A client that went away (a poller stopped, the aggregator
closing a proxied connection, a browser tab closed or reloaded mid-answer) is not our failure:
one debug line. Anything else is logged as the error it is. (The dashboard's e2e test met a
browser that dropped a request while its JSON answer was written: a BrokenPipeError traceback
on stderr, which that test rightly refuses.)
"""

from __future__ import annotations

import ssl
import sys
from http.server import ThreadingHTTPServer
from typing import Any, Final

import structlog

log = structlog.get_logger(__name__)

GONE: Final = (ConnectionError, TimeoutError, ssl.SSLEOFError, ssl.SSLZeroReturnError)
"""What a connection that ended under us raises (BrokenPipe and resets are ConnectionErrors)."""


class QuietServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer whose `handle_error` knows a client gone (module doc)."""

    daemon_threads = True
    what = "http"
    """Names the server in its log lines ("<what> client went away")."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, GONE):
            log.debug(f"{self.what} client went away", peer=str(client_address), error=str(exc))
            return
        log.exception(f"{self.what} connection failed", peer=str(client_address))
