"""`koordqueue dashboard`: a read-only web page of the queues, live from the cluster.

Serves on localhost (by default) a static page (dashboard_static/: HTML, CSS and a little
plain JS, no build step, nothing fetched from elsewhere) and three GET endpoints:

    /api/state              the state as JSON (dashboard_model.dashboard_state)
    /api/stream             server-sent events: the state at once, then each new one
    /api/explain?namespace=NS&name=NAME
                            `koordqueue explain` of one unit, from the same watched objects

It reads the cluster with the operator's kubeconfig (--kubeconfig, --context) and never
writes: the server answers GET only, and the feed makes GET requests only (list, watch, the
visibility API). Bound to 127.0.0.1 unless --address says otherwise; requests naming another
host are refused (a page of another site cannot read it through DNS rebinding).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, urlsplit

from koordqueue.domain.names import DEFAULT_OVERSELL_RATE, QUEUE_NAMESPACE
from koordqueue.kube.http_serving import QuietServer

if TYPE_CHECKING:
    from koordqueue.cli.dashboard_feed import DashboardFeed

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_BAD_INPUT: Final = 2
DEFAULT_PORT: Final = 8087
KEEPALIVE: Final = 15.0
"""Seconds between comment lines on an idle event stream (proxies drop silent ones)."""
STATIC: Final = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}
LOCAL_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
MSG_SERVING: Final = (
    "koordqueue dashboard: serving {url} (cluster {cluster}; read-only; Ctrl-C stops)"
)


def static_file(name: str) -> bytes:
    return (files("koordqueue.cli") / "dashboard_static" / name).read_bytes()


Explainer = Callable[[str, str], tuple[int, dict[str, Any]]]
"""(namespace, name) -> (HTTP status, answer)."""


class DashboardServer(QuietServer):
    what = "dashboard"  # (a page closed mid-answer: http_serving.py)

    def __init__(self, address: tuple[str, int], feed: DashboardFeed, explainer: Explainer,
                 allowed_hosts: frozenset[str] = LOCAL_HOSTS) -> None:
        super().__init__(address, DashboardHandler)
        self.feed = feed
        self.explainer = explainer
        self.allowed_hosts = allowed_hosts

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"


class DashboardHandler(BaseHTTPRequestHandler):
    server: DashboardServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the terminal; errors are answered, not logged

    def _host_allowed(self) -> bool:
        allowed = self.server.allowed_hosts
        if not allowed:
            return True
        host = (self.headers.get("Host") or "").strip().lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name in allowed

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, doc: object) -> None:
        self._send(status, json.dumps(doc).encode(), "application/json")

    def _refuse(self) -> None:
        self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "read-only: GET only"})

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse  # noqa: N815 (http.server's names)

    def do_GET(self) -> None:
        if not self._host_allowed():
            self._json(HTTPStatus.FORBIDDEN, {"error": "unexpected Host header"})
            return
        url = urlsplit(self.path)
        if url.path in STATIC:
            name, content_type = STATIC[url.path]
            self._send(HTTPStatus.OK, static_file(name), content_type)
        elif url.path == "/api/state":
            _, body = self.server.feed.state()
            self._send(HTTPStatus.OK, body, "application/json")
        elif url.path == "/api/stream":
            self._stream()
        elif url.path == "/api/explain":
            query = parse_qs(url.query)
            namespace = (query.get("namespace") or [""])[0]
            name = (query.get("name") or [""])[0]
            if not namespace or not name:
                self._json(HTTPStatus.BAD_REQUEST, {"error": "namespace and name are needed"})
                return
            status, doc = self.server.explainer(namespace, name)
            self._json(status, doc)
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path}"})

    def _stream(self) -> None:
        """Server-sent events: `state` with each new state, a comment line when idle."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        feed, seen = self.server.feed, 0
        try:
            while not feed.stopped:
                version, body = feed.state(seen, KEEPALIVE)
                if version == seen:
                    self.wfile.write(b": idle\n\n")
                else:
                    seen = version
                    self.wfile.write(b"event: state\ndata: " + body + b"\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return  # the page went away


# --- explain ------------------------------------------------------------------------------


def make_explainer(feed: DashboardFeed, queue_namespace: str, oversell_rate: str) -> Explainer:
    """`koordqueue explain` of a unit, read from the feed's objects instead of fresh lists."""
    from koordqueue.cli.explain_render import render_table
    from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT
    from koordqueue.simulation.explain import ClusterView, explain, explain_missing

    def explainer(namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        key = f"{namespace}/{name}"
        view = ClusterView.from_objects(
            feed.objects(ELASTIC_QUOTA), feed.objects(QUEUE), feed.objects(QUEUE_UNIT),
            oversell_rate=oversell_rate, queue_namespace=queue_namespace,
            source=f"cluster {feed.cluster}",
        )
        result = explain(view, key) or explain_missing(view, key, None)
        if result is None:
            return HTTPStatus.NOT_FOUND, {"unit": key, "error": f"QueueUnit {key} not found"}
        return HTTPStatus.OK, {"unit": key, "reason": result.reason.value,
                               "text": render_table(result, view)}

    return explainer


# --- the command --------------------------------------------------------------------------


def add_dashboard_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "dashboard", help="serve a read-only web page of the quota tree and the queues, live",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context to use")
    parser.add_argument("--address", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default: {DEFAULT_PORT}; 0: any free one)")
    parser.add_argument("--interval", type=float, default=2.0,
                        help="seconds between reads of the pending order when nothing "
                             "watched changes (default: 2)")
    parser.add_argument("--queue-namespace", default=QUEUE_NAMESPACE,
                        help=f"namespace that holds the Queues (default: {QUEUE_NAMESPACE})")
    parser.add_argument("--oversellrate", default=str(DEFAULT_OVERSELL_RATE),
                        help="the controller's --oversellrate, for explain (default: 1)")
    parser.set_defaults(func=run_dashboard)


def run_dashboard(args: argparse.Namespace) -> int:
    from kubernetes.config import ConfigException

    from koordqueue.cli.dashboard_feed import DashboardFeed
    from koordqueue.domain.quota_tree import parse_oversell_rate
    from koordqueue.kube.api import KubeApi, load_api_client

    def error(message: str, code: int) -> int:
        print(f"koordqueue dashboard: error: {message}", file=sys.stderr)
        return code

    if args.interval <= 0:
        return error(f"--interval must be > 0, got {args.interval}", EXIT_BAD_INPUT)
    try:
        parse_oversell_rate(args.oversellrate)
    except ValueError as exc:
        return error(str(exc), EXIT_BAD_INPUT)
    try:
        api_client = load_api_client(args.kubeconfig, args.context)
    except (ConfigException, OSError) as exc:
        return error(f"cannot load kubeconfig: {exc}", EXIT_BAD_INPUT)
    from koordqueue.cli.logs import configure_logging

    configure_logging("console", "warning")  # on stderr: a failing watch says so
    cluster = str(api_client.configuration.host)
    feed = DashboardFeed(KubeApi(api_client, timeout=15.0), queue_namespace=args.queue_namespace,
                         interval=args.interval, cluster=cluster)
    explainer = make_explainer(feed, args.queue_namespace, args.oversellrate)
    allowed = LOCAL_HOSTS if args.address in LOCAL_HOSTS else frozenset()
    try:
        server = DashboardServer((args.address, args.port), feed, explainer, allowed)
    except OSError as exc:
        return error(f"cannot listen on {args.address}:{args.port}: {exc}", EXIT_FAILURE)
    feed.start()
    print(MSG_SERVING.format(url=server.url, cluster=cluster), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        feed.stop()
        server.server_close()
    return EXIT_OK
