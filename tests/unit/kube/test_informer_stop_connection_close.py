"""WatchStream.stop() unblocks an idle watch read on a real urllib3 response, also when the
server answered `Connection: close` (a proxy, a load balancer, or a client that asked for it).

With `Connection: close`, http.client hands the socket over to the response and drops it from
the connection (`connection.sock` is None), so a stop that shuts `connection.sock` down found
nothing to shut: every informer's stop then waited out its join bound while its watch thread
stayed blocked in the read, and `koordqueue run` behind such a proxy took ~35 s to exit on
SIGTERM (5 s for each of its seven informers; tests/e2e/test_faults.py and test_dead_watch.py,
whose controllers talk through tests/controlplane/faultproxy.py, spent most of their time there).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from koordqueue.kube.informer import WatchStream

EVENT = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "a",
                                                              "resourceVersion": "5"}}})


@pytest.fixture
def silent_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, threading.Event]]:
    """A loopback HTTP/1.1 server: one chunked watch answer with one event, then silence with
    the connection held open (until the test ends). `request.param`: send Connection: close."""
    close = bool(request.param)
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            body = (EVENT + "\n").encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n"
                + (b"Connection: close\r\n" if close else b"")
                + b"\r\n" + f"{len(body):x}\r\n".encode() + body + b"\r\n"
            )
            done.wait(20)  # silent, open: a watch with nothing to say

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/api/v1/pods?watch=1", done
    finally:
        done.set()
        server.join(5)
        listener.close()


@pytest.mark.parametrize("silent_server", [True, False], ids=["connection-close", "keep-alive"],
                         indirect=True)
def test_stop_unblocks_an_idle_read_of_a_real_response(
    silent_server: tuple[str, threading.Event],
) -> None:
    url, _ = silent_server
    with urllib3.PoolManager() as pool:
        response = pool.request("GET", url, preload_content=False,
                                timeout=urllib3.Timeout(connect=2, read=15))
        watch = WatchStream()
        seen: list[dict[str, Any]] = []
        errors: list[BaseException] = []

        def read() -> None:
            try:
                seen.extend(watch.events(response))
            except Exception as exc:  # a cut stream may end in a protocol error: fine here
                errors.append(exc)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(0.1)
        assert reader.is_alive(), "blocked on the idle stream"
        assert [e["type"] for e in seen] == ["ADDED"]
        watch.stop()
        reader.join(2)
        assert not reader.is_alive(), "stop() left the read blocked (until the read timeout)"
