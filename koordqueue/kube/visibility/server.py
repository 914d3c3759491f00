"""The visibility API over HTTPS: routes, discovery and Status answers.

An aggregated API server's surface, on the standard library's threading HTTP server (one
thread per connection, HTTP/1.1 keep-alive for the aggregator's pooled connections): every
request but the health paths is authenticated and authorized (auth.py) before it is read;
answers come from `PendingView` (view.py), never from the engine. Read-only: anything but
GET is refused with 405. Long answers go gzip-encoded to clients that accept it.

    /apis/visibility.koord-queue.io/v1alpha1/pendingunits               every pending unit
    /apis/visibility.koord-queue.io/v1alpha1/queues[/NAME[/queueunits]]
    /apis/visibility.koord-queue.io/v1alpha1/elasticquotas[/NAME[/queueunits]]
    options (query): namespace, queue, phase, offset, limit
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import orjson
import structlog

from koordqueue.domain import names
from koordqueue.kube.api import ApiError
from koordqueue.kube.http_serving import QuietServer
from koordqueue.kube.visibility.auth import Attributes, Delegated, Headers, User
from koordqueue.kube.visibility.gzip_answer import GzipAnswers, accepts_gzip
from koordqueue.kube.visibility.view import (
    API_VERSION,
    BadQuery,
    Parts,
    PendingView,
    parse_query,
)

log = structlog.get_logger(__name__)

GROUP: Final = names.VISIBILITY_GROUP
VERSION: Final = names.VISIBILITY_VERSION
PREFIX: Final = f"/apis/{GROUP}/{VERSION}"
HEALTH_PATHS: Final = frozenset({"/healthz", "/readyz", "/livez"})
"""Answered without authentication (k8s.io/apiserver's AlwaysAllowPaths)."""
POLL_INTERVAL: Final = 0.1
"""Seconds between the accept loop's looks at a shutdown request (how long stop() takes)."""
GZIP_FROM: Final = 16 * 1024
"""Answers at least this long go gzip-encoded to a client that accepts it (gzip_answer.py);
shorter ones are not worth the client's inflating."""
MSG_NO_ROUND: Final = (
    "no admission round yet: this replica is starting or is the standby (the leader serves)"
)

RESOURCES: Final = (
    (names.VISIBILITY_PENDING, "PendingUnitsSummary", ["list"]),
    (names.VISIBILITY_QUEUES, "Queue", ["get", "list"]),
    (f"{names.VISIBILITY_QUEUES}/{names.VISIBILITY_SUBRESOURCE}",
     names.VISIBILITY_SUMMARY_KIND, ["get"]),
    (names.VISIBILITY_QUOTAS, "ElasticQuota", ["get", "list"]),
    (f"{names.VISIBILITY_QUOTAS}/{names.VISIBILITY_SUBRESOURCE}",
     names.VISIBILITY_SUMMARY_KIND, ["get"]),
)


def resource_list() -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": API_VERSION,
        "resources": [
            {"name": name, "singularName": "", "namespaced": False, "kind": kind, "verbs": verbs}
            for name, kind, verbs in RESOURCES
        ],
    }


def api_group() -> dict[str, Any]:
    version = {"groupVersion": API_VERSION, "version": VERSION}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version],
            "preferredVersion": version}


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A metav1 Status, as every Kubernetes API server answers an error."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


Answer = tuple[int, dict[str, Any] | bytes | Parts]
"""A status code and its body: a document, or JSON already serialised (view.py)."""


class Routes:
    """Path -> (what to authorize, how to answer); pure given the view and auth."""

    def __init__(self, view: PendingView, auth: Delegated) -> None:
        self.view = view
        self.auth = auth

    def handle(
        self, method: str, target: str, peer_cert: Mapping[str, Any] | None, header: Headers
    ) -> Answer:
        split = urlsplit(target)
        path = split.path.rstrip("/") or "/"
        if path in HEALTH_PATHS:
            return 200, {"status": "ok"}
        try:
            user = self.auth.authenticate(peer_cert, header)
        except ApiError as exc:
            return 503, status(503, "ServiceUnavailable", f"token review failed: {exc.message}")
        if user is None:
            return 401, status(401, "Unauthorized", "Unauthorized")
        if method != "GET":
            return 405, status(405, "MethodNotAllowed", f"{method} is not supported: read-only")
        attrs, answer = self._route(path)
        if attrs is None:
            return 404, status(404, "NotFound", f"the server could not find {path}")
        allowed, why = self.auth.authorize(user, attrs)
        if not allowed:
            return 403, status(403, "Forbidden", _forbidden(user, attrs, why))
        try:
            return answer(parse_qs(split.query))
        except BadQuery as exc:
            return 400, status(400, "BadRequest", str(exc))

    def _route(
        self, path: str
    ) -> tuple[Attributes | None, Callable[[dict[str, list[str]]], Answer]]:
        if path == "/apis":
            group_list = {"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group()]}
            return Attributes("get", path), lambda _: (200, group_list)
        if path == f"/apis/{GROUP}":
            return Attributes("get", path), lambda _: (200, api_group())
        if path == PREFIX:
            return Attributes("get", path), lambda _: (200, resource_list())
        if not path.startswith(PREFIX + "/"):
            return None, _not_found
        parts = path[len(PREFIX) + 1 :].split("/")
        resource, name = parts[0], parts[1] if len(parts) > 1 else ""
        sub = parts[2] if len(parts) > 2 else ""
        if len(parts) > 3 or (sub and sub != names.VISIBILITY_SUBRESOURCE):
            return None, _not_found
        verb = "get" if name else "list"
        attrs = Attributes(verb, path, GROUP, VERSION, resource, sub, name)
        view = self.view

        def answer(params: dict[str, list[str]]) -> Answer:
            query = parse_query(params)
            snap = view.snapshot()
            if snap is None:
                return 503, status(503, "ServiceUnavailable", MSG_NO_ROUND)
            if resource == names.VISIBILITY_PENDING and not name:
                return 200, view.pending(snap, query)
            if resource == names.VISIBILITY_QUEUES:
                if not name:
                    return 200, view.queue_list(snap)
                return 200, view.pending(snap, query, name) if sub else view.queue(snap, name)
            if resource == names.VISIBILITY_QUOTAS:
                if not name:
                    return 200, view.quota_list(snap)
                return 200, view.in_quota(snap, name, query) if sub else view.quota(snap, name)
            return 404, status(404, "NotFound", f"the server could not find {path}")

        known = {names.VISIBILITY_PENDING, names.VISIBILITY_QUEUES, names.VISIBILITY_QUOTAS}
        if resource not in known or (resource == names.VISIBILITY_PENDING and name):
            return None, _not_found
        return attrs, answer


def _not_found(_: dict[str, list[str]]) -> Answer:  # pragma: no cover (never authorized)
    return 404, status(404, "NotFound", "not found")


def _forbidden(user: User, attrs: Attributes, why: str) -> str:
    if attrs.is_resource:
        target = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
        what = f'{target} "{attrs.name}"' if attrs.name else target
        message = (f'{what} is forbidden: User "{user.name}" cannot {attrs.verb} resource '
                   f'"{target}" in API group "{GROUP}"')
    else:
        message = f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    return f"{message}: {why}" if why else message


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        sock = self.request
        if isinstance(sock, ssl.SSLSocket):  # handshake here, on this connection's thread
            sock.settimeout(self.server.handshake_timeout)
            sock.do_handshake()
            sock.settimeout(None)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        sock = self.request
        peer = sock.getpeercert() if isinstance(sock, ssl.SSLSocket) else None
        try:
            code, body = self.server.routes.handle(
                method, self.path, peer, self.headers
            )
        except Exception:
            log.exception("visibility request failed", path=self.path)
            code, body = 500, status(500, "InternalError", "internal error")
        if isinstance(body, Parts):
            chunks = body.chunks
        else:
            chunks = (body if isinstance(body, bytes) else orjson.dumps(body),)
        gzipped = (sum(len(chunk) for chunk in chunks) >= GZIP_FROM
                   and accepts_gzip(self.headers.get("Accept-Encoding")))
        if gzipped:
            chunks = self.server.gzip.encode(chunks)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(sum(len(chunk) for chunk in chunks)))
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)

    def log_message(self, format: str, *args: Any) -> None:
        """(Quiet: one log line per request would drown the controller's.)"""


class _Server(QuietServer):
    routes: Routes
    gzip: GzipAnswers
    handshake_timeout: float = 10.0
    what = "visibility"  # (its log lines: http_serving.py; bench_visibility_live.py had
    # printed socketserver's traceback for every poller it stopped)


class VisibilityServer:
    """The HTTPS server on its own thread; `port` 0 picks a free one (see `.port`)."""

    def __init__(
        self,
        routes: Routes,
        port: int,
        cert: str,
        key: str,
        host: str = "0.0.0.0",
    ) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert, key)
        # only the requestheader CA: a verified certificate is the aggregator's (auth.py)
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=routes.auth.config.client_ca)
        server = _Server((host, port), _Handler, bind_and_activate=True)
        server.routes = routes
        server.gzip = GzipAnswers()
        server.socket = context.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
        self._server = server
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> VisibilityServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(POLL_INTERVAL,), name="kq-visibility",
            daemon=True,
        )
        self._thread.start()
        log.info("visibility API serving", port=self.port)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
