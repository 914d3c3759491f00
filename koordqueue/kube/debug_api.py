"""The read-only debugging HTTP API (Koord-Queue's `--enableApiHandler`, port 19876).

`GET /apis/v1/elasticquota` answers the quota tree's view (domain/quota_debug.py) as
Koord-Queue's handler does: a JSON object keyed by quota name, indented with tabs. The engine
belongs to the controller's owner thread, so a request does not read it: it posts the read
onto the owner loop and waits for the answer (503 if the loop does not answer in time, e.g.
while a long round runs). Nothing else is served: another path is 404, another method 405.
Off by default; like Koord-Queue's, it starts once this process leads and is not exposed by a
Service (`kubectl port-forward`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import structlog

log = structlog.get_logger(__name__)

ELASTIC_QUOTA_PATH: Final = "/apis/v1/elasticquota"
DEFAULT_PORT: Final = 19876
"""Koord-Queue's debug port."""
ANSWER_TIMEOUT: Final = 5.0
"""Seconds a request waits for the owner loop to read the engine."""

POLL: Final = 0.1
"""Seconds between the server's looks at a stop request."""

Post = Callable[[Callable[[], None]], None]


def on_owner(post: Post, read: Callable[[], Any], timeout: float = ANSWER_TIMEOUT) -> Any:
    """`read()` run on the owner loop (through `post`), its answer here; TimeoutError."""
    answer: Future[Any] = Future()

    def run() -> None:
        try:
            answer.set_result(read())
        except Exception as exc:  # told to the waiting request, not the loop
            answer.set_exception(exc)

    post(run)
    try:
        return answer.result(timeout)
    except FutureTimeout:
        raise TimeoutError(f"the controller did not answer within {timeout:.0f}s") from None


class DebugApi:
    """The debug server on `port` (0: a free port, see `port` after `start`)."""

    def __init__(self, port: int, view: Callable[[], dict[str, Any]], host: str = "") -> None:
        self._view = view
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(POLL,), name="kq-debug-api", daemon=True
        )
        self._thread.start()
        log.info("debug api serving", port=self.port, path=ELASTIC_QUOTA_PATH)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        view = self._view

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0].rstrip("/") != ELASTIC_QUOTA_PATH:
                    self._send(HTTPStatus.NOT_FOUND, {"error": f"no such path: {self.path}"})
                    return
                try:
                    body = view()
                except TimeoutError as exc:
                    self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(exc)})
                    return
                self._send(HTTPStatus.OK, body)

            def _refuse(self) -> None:
                self._send(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "read-only: GET only"})

            do_POST = do_PUT = do_PATCH = do_DELETE = _refuse  # noqa: N815

            def _send(self, status: HTTPStatus, body: object) -> None:
                data = json.dumps(body, indent="\t").encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("debug api request", request=format % args)

        return Handler
