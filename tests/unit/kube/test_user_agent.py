"""Every request names its process: `koordqueue/<version> (<leader-election identity>)`.

The API server's audit log records each request's user agent; with the process identity in
it, an audit line says which replica wrote, and the Lease's holderIdentity which replica led
at the time (bench/soak.py checks that no replica but the leader writes). Before, every
replica sent the generated client's `OpenAPI-Generator/...` agent.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from koordqueue import __version__
from koordqueue.kube.api import JOB, KubeApi, load_api_client
from koordqueue.kube.leader import default_identity


def test_requests_carry_the_version_and_the_leader_election_identity(tmp_path: Path) -> None:
    agents: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            agents.append(self.headers.get("User-Agent") or "")
            data = b'{"metadata": {"name": "x"}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{server.server_address[1]}'}}}}]\n"
        "users: [{name: u, user: {}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    try:
        KubeApi(load_api_client(str(kubeconfig))).get(JOB, "x", "ns")
    finally:
        server.shutdown()
        server.server_close()
    assert agents == [f"koordqueue/{__version__} ({default_identity()})"]
