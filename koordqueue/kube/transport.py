"""The connection to the API server through urllib3: its host's pool, and the leader-election
fence asked on the connection itself. KubeApi uses it where libcurl's transport
(curl_transport.py, less than half the CPU per request) cannot make the same connection: a
proxy, a TLS server name; the rules below hold for both.

A request goes straight to the pool of the API server's host (`Transport`), not through the
generated client's `param_serialize` / `call_api` / `RESTClientObject` layers and the pool
manager's per-request host lookup: those re-derived the same URL, headers and timeout for
every write, a fifth of the controller's CPU per admission in bench_controller.py's profile.
Auth is read from the configuration on every request as the client does (a refresh hook, as
in-cluster token rotation, still applies).

The leader-election fence (`KubeApi(fence=...)`) is asked twice for a write: early, to save
the work when it is already shut, and last on the pooled connection itself (`FencedSend`):
after the connection is open (TCP and TLS done) and the request line, headers and body are
serialised, immediately before the one `sendall` that hands them to the kernel. A pause
(SIGSTOP, a GC pause) or a wait (for a pooled connection, a slow handshake) anywhere before
that refuses the write on waking. The window left runs from the fence's clock read to the
write syscall inside that `sendall` (for TLS, after the record is encrypted). Measured on
loopback with a 1 KB body (issue 12): 8 µs median to entering `sendall`, p99 under 20 µs;
31 µs (HTTP) / 61 µs (TLS) median to its return, p99 about 0.5 ms; milliseconds when the
writing thread loses the GIL in between. (Before, it ran from the early check: 0.23 ms median
to the first byte on a kept-alive connection, plus any pool wait or handshake.) A body over
one TLS record (16 KiB) leaves in several writes. A pause landing in that window still lets
the one write out after the wake. Writes carrying a resourceVersion precondition (the
conditional unit status patches, gate removals, the Lease) are then refused by the server as
stale; Events (creates and count bumps), other creates and unconditional patches have no
such guard: for them the guarantee is "nothing after the check plus the send window".
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, Final

import urllib3
from kubernetes import client as k8s_client
from urllib3._collections import RecentlyUsedContainer
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import ClosedPoolError

from koordqueue.kube.api_errors import FENCED, ApiError

URLLIB3_RETRIES: Final = urllib3.Retry(3, respect_retry_after_header=False)
"""urllib3's own retries, minus its Retry-After handling (it retried only GET, PUT and DELETE,
slept whatever the header said, and after three raised MaxRetryError, losing the status):
KubeApi.request retries on Retry-After itself, for every verb."""


class FencedError(Exception):
    """The fence refused a write at the last moment, on the connection (see `FencedSend`).

    Deliberately not an OSError / HTTPException / urllib3 error: urllib3 would take those for
    a broken connection and retry the request, and KubeApi for a retryable failure.
    """


def not_leader(method: str, path: str) -> ApiError:
    return ApiError(FENCED, "NotLeader", "write refused: this process is not the leader",
                    method, path)


class FencedSend(HTTPConnection):
    """A pooled connection that asks the fence immediately before a write's bytes go out.

    Mixed (first) into the pool's own connection class, HTTP or HTTPS (or SOCKS), per
    transport: `fence` is that transport's. For any method but GET, `request` opens the
    connection first when it is not (TCP, and TLS for HTTPS: the pool already does that
    before calling `request`), then lets urllib3 serialise the request line and headers, the
    body held back (framed by our Content-Length). The first `send` is the complete header
    block: the fence is asked there, and on yes the headers and the body go out in one
    `sendall`. urllib3 calls `request` once per attempt, so each of its retries asks again;
    a refusal raises `FencedError`, which urllib3 does not retry.
    """

    fence: Callable[[], bool] | None = None
    _fence_due = False
    _fence_body: bytes | None = None
    """The write's body, held back from urllib3 to go out with the headers."""

    def request(  # type: ignore[override]
        self,
        method: str,
        url: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        if self.fence is None or method == "GET":
            super().request(method, url, body, headers, **kwargs)
            return
        if self.is_closed:
            self.connect()  # the handshake's pauses come before the check, not after it
        if isinstance(body, bytes):  # framed here; urllib3 sends no body of its own
            headers = {**(headers or {}), "Content-Length": str(len(body))}
            self._fence_body, body = body, None
        self._fence_due = True
        try:
            super().request(method, url, body, headers, **kwargs)
        finally:
            self._fence_due = False
            self._fence_body = None

    def send(self, data: Any) -> None:
        if self._fence_due:  # the complete header block: the last moment before the wire
            self._fence_due = False
            assert self.fence is not None
            if not self.fence():
                raise FencedError
            if self._fence_body:
                data = bytes(data) + self._fence_body
        super().send(data)


def fenced_manager(
    shared: urllib3.PoolManager, fence: Callable[[], bool]
) -> urllib3.PoolManager:
    """A copy of the client's pool manager (same TLS, proxy, retries and pool size) whose pools
    are its own and make `FencedSend` connections asking `fence`.

    Own pools, since the client's are shared with unfenced users (the election's own client).
    """
    manager = copy.copy(shared)
    manager.pools = RecentlyUsedContainer(4)  # one API server: one pool
    manager.connection_pool_kw = dict(shared.connection_pool_kw)
    classes: dict[str, type[HTTPConnectionPool]] = {}
    for scheme, pool_cls in shared.pool_classes_by_scheme.items():
        assert issubclass(pool_cls, HTTPConnectionPool)  # (urllib3's only kind)
        connection_cls = type(
            f"Fenced{pool_cls.ConnectionCls.__name__}",
            (FencedSend, pool_cls.ConnectionCls),
            {"fence": staticmethod(fence)},
        )
        classes[scheme] = type(
            f"Fenced{pool_cls.__name__}", (pool_cls,), {"ConnectionCls": connection_cls}
        )
    manager.pool_classes_by_scheme = classes
    return manager


def client_headers(api_client: k8s_client.ApiClient) -> dict[str, str]:
    """What every request of this client carries (its user agent, a cookie), either transport."""
    headers = {str(k): str(v) for k, v in api_client.default_headers.items()}
    if api_client.cookie:
        headers["Cookie"] = str(api_client.cookie)
    return headers


def add_token(configuration: k8s_client.Configuration, headers: dict[str, str]) -> None:
    """The bearer token, read per request as the client does (a refresh hook, as in-cluster
    token rotation, still applies)."""
    auth = configuration.auth_settings().get("BearerToken")
    if auth and auth.get("value"):
        headers[str(auth["key"])] = str(auth["value"])


class Transport:
    """The API server's connection pool and what every request to it carries."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        timeout: float,
        fence: Callable[[], bool] | None = None,
    ) -> None:
        configuration = api_client.configuration
        self.configuration = configuration
        self.host = str(configuration.host).rstrip("/")
        self.manager = api_client.rest_client.pool_manager
        if fence is not None:
            self.manager = fenced_manager(self.manager, fence)
        self.direct = type(self.manager) is urllib3.PoolManager  # (a proxy manager: by URL)
        self.pool = self.manager.connection_from_url(self.host) if self.direct else None
        self.headers = client_headers(api_client)
        self.timeout = urllib3.Timeout(total=timeout)
        self.retries = URLLIB3_RETRIES

    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> urllib3.BaseHTTPResponse:
        add_token(self.configuration, headers)
        if self.pool is None:
            return self.manager.urlopen(
                method, self.host + path, body=body, headers=headers, timeout=self.timeout,
                retries=self.retries, preload_content=True,
            )
        try:
            return self.pool.urlopen(
                method, path, body=body, headers=headers, timeout=self.timeout,
                retries=self.retries, preload_content=True,
            )
        except ClosedPoolError:  # the manager dropped it (never with one host): take it again
            self.pool = self.manager.connection_from_url(self.host)
            raise
