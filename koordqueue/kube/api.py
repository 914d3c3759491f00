"""The only place that talks to the Kubernetes API for writes and lists.

Objects are plain dicts (the JSON the API server speaks), so the pure core can consume them
unchanged. Built on `kubernetes.client.ApiClient` for configuration, auth and TLS; requests
go through its urllib3 connection pool with JSON bodies, which keeps server-side apply,
JSON/merge patch and optimistic concurrency (resourceVersion preconditions) explicit.

A request goes straight to the pool of the API server's host (`_Transport`), not through the
generated client's `param_serialize` / `call_api` / `RESTClientObject` layers and the pool
manager's per-request host lookup: those re-derived the same URL, headers and timeout for
every write, a fifth of the controller's CPU per admission in bench_controller.py's profile.
Auth is read from the configuration on every request as the client does (a refresh hook, as
in-cluster token rotation, still applies).

The leader-election fence (`KubeApi(fence=...)`) is asked twice for a write: early, to save
the work when it is already shut, and last on the pooled connection itself (`_FencedSend`):
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
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import quote, urlencode

import orjson
import structlog
import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from urllib3._collections import RecentlyUsedContainer
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import ClosedPoolError

from koordqueue.domain import names
from koordqueue.domain.backoff import Backoff, retry

log = structlog.get_logger(__name__)
FIELD_MANAGER: Final = "koordqueue"
RETRY_AFTER: Final = "Retry-After"
FLOW_SCHEMA_UID: Final = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_UID: Final = "X-Kubernetes-PF-PriorityLevel-UID"
"""API Priority and Fairness names the flow schema and priority level that classified a
request in these two headers of every answer; client-go quotes the flow schema's in the
reason of a 429's retry."""
MAX_RETRIES: Final = 10
"""Answers with a `Retry-After` a request retries by itself (client-go rest's maxRetries)."""
URLLIB3_RETRIES: Final = urllib3.Retry(3, respect_retry_after_header=False)
"""urllib3's own retries, minus its Retry-After handling (it retried only GET, PUT and DELETE,
slept whatever the header said, and after three raised MaxRetryError, losing the status):
KubeApi.request retries on Retry-After itself, for every verb."""
RETRY_AFTER_CAP: Final = 30.0
"""Seconds: the longest `Retry-After` we wait out before one retry (the reflector's back-off
cap); the server's usual value is 1 s (APF and max-in-flight throttling)."""
FENCED: Final = -1
"""ApiError.status of a write refused locally: this process is not (or no longer) the leader."""
T = TypeVar("T")
Listing = tuple[list[dict[str, Any]], str]
"""Objects of one kind and the list's resourceVersion, to watch from."""


def loads(data: bytes | str) -> Any:
    """`json.loads`, 2-3x faster: orjson first, the standard library when orjson refuses.

    Decoding the API server's answers and watch events was the largest CPU cost after the HTTP
    calls themselves (bench/HISTORY.md, bench_decode). orjson refuses what the standard
    library accepts (NaN/Infinity literals, a BOM, lone surrogates, UTF-16) or rejects with
    another class (invalid UTF-8: UnicodeDecodeError); falling back on any refusal keeps every
    result and every exception exactly json.loads'. The one difference left: an integer outside
    the 64-bit range decodes as a float (the API server never writes one: Go's int64/float64).
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


@dataclass(frozen=True, slots=True)
class Kind:
    """Enough to build REST paths for one resource type."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


ELASTIC_QUOTA: Final = Kind(
    names.ELASTIC_QUOTA_GROUP,
    names.ELASTIC_QUOTA_VERSION,
    names.ELASTIC_QUOTA_PLURAL,
    "ElasticQuota",
)
QUEUE: Final = Kind(names.KOORD_QUEUE_GROUP, names.KOORD_QUEUE_VERSION, names.QUEUE_PLURAL, "Queue")
QUEUE_UNIT: Final = Kind(
    names.KOORD_QUEUE_GROUP, names.KOORD_QUEUE_VERSION, names.QUEUE_UNIT_PLURAL, "QueueUnit"
)
JOB: Final = Kind("batch", "v1", "jobs", "Job")
EVENT: Final = Kind("", "v1", "events", "Event")
POD: Final = Kind("", "v1", "pods", "Pod")
NODE: Final = Kind("", "v1", "nodes", "Node", namespaced=False)
POD_DISRUPTION_BUDGET: Final = Kind(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"
)
NAMESPACE: Final = Kind("", "v1", "namespaces", "Namespace", namespaced=False)
PRIORITY_CLASS: Final = Kind("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
POD_GROUP: Final = Kind(
    names.VOLCANO_GROUP, names.VOLCANO_VERSION, names.POD_GROUP_PLURAL, "PodGroup"
)
VOLCANO_QUEUE: Final = Kind(
    names.VOLCANO_GROUP,
    names.VOLCANO_VERSION,
    names.VOLCANO_QUEUE_PLURAL,
    "Queue",
    namespaced=False,
)


class ApiError(Exception):
    """A non-2xx answer, with the server's Status message (what kubectl would print).

    `retry_after`: the seconds a 429 or 5xx answer's `Retry-After` header asked for (None
    without one), which every retry here waits at least (`wait_hint`), as client-go's
    request retry does; `flow_schema` / `priority_level`: APF's classification of a
    throttled request (its `X-Kubernetes-PF-*` headers), quoted in the message.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        method: str,
        path: str,
        *,
        retry_after: float | None = None,
        flow_schema: str = "",
        priority_level: str = "",
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.flow_schema = flow_schema
        self.priority_level = priority_level
        text = f"{method} {path}: {status} {reason}: {message}"
        if retry_after is not None:
            text += f" (retry after {retry_after:g} s"
            if status == 429:  # client-go's retry reason for APF throttling
                text += (f"; server-side throttling, FlowSchema UID {flow_schema!r},"
                         f" PriorityLevel UID {priority_level!r}")
            text += ")"
        super().__init__(text)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def retryable(self) -> bool:
        return self.status in (0, 429, 500, 502, 503, 504)

    @property
    def fenced(self) -> bool:
        return self.status == FENCED

    @property
    def wait_hint(self) -> float:
        """Seconds to wait at least before retrying: the server's `Retry-After`, capped."""
        return min(self.retry_after, RETRY_AFTER_CAP) if self.retry_after else 0.0


def retry_after(status: int, headers: Mapping[str, str] | None) -> float | None:
    """The `Retry-After` of a 429 or 5xx answer in whole seconds, None when absent or not a
    number (client-go's checkWait: only those statuses, only the seconds form)."""
    if headers is None or not (status == 429 or status >= 500):
        return None
    raw = headers.get(RETRY_AFTER)
    if raw is None:
        return None
    try:
        seconds = int(str(raw).strip())
    except ValueError:
        return None
    return float(seconds) if seconds >= 0 else None


def wait_hint(exc: BaseException) -> float:
    """The least wait before retrying after `exc`: its `Retry-After` (an ApiError, or the
    kubernetes client's ApiException a watch raises), else 0."""
    if isinstance(exc, ApiError):
        return exc.wait_hint
    if isinstance(exc, ApiException):
        seconds = retry_after(int(exc.status or 0), exc.headers)
        return min(seconds, RETRY_AFTER_CAP) if seconds else 0.0
    return 0.0


class KubeconfigError(k8s_config.ConfigException):
    """A kubeconfig that cannot be used, with its path in the message (the client's own
    errors, e.g. "Invalid kube-config file. No configuration found.", name no file)."""


def load_api_client(
    kubeconfig: str | None = None, context: str | None = None, pool_size: int = 48
) -> k8s_client.ApiClient:
    """An ApiClient from the given kubeconfig, $KUBECONFIG/~/.kube/config, or in-cluster config.

    `pool_size` caps the kept-alive connections: size it to the threads that call the API at
    once (the client's default, 10, makes a busy controller re-open connections). A missing
    or unusable kubeconfig raises KubeconfigError naming the file.
    """
    configuration = k8s_client.Configuration()
    configuration.connection_pool_maxsize = pool_size
    if kubeconfig:
        _load_kube_config(configuration, kubeconfig, context)
    else:
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except k8s_config.ConfigException:
            _load_kube_config(configuration, None, context)
    return k8s_client.ApiClient(configuration)


def _load_kube_config(
    configuration: k8s_client.Configuration, path: str | None, context: str | None
) -> None:
    where = path or os.environ.get("KUBECONFIG") or k8s_config.KUBE_CONFIG_DEFAULT_LOCATION
    if path and not os.path.isfile(os.path.expanduser(path)):
        raise KubeconfigError(f"kubeconfig {path}: no such file")
    try:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            path, context=context, client_configuration=configuration
        )
    except (k8s_config.ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"kubeconfig {where}: {' '.join(str(exc).split())}") from exc


class ObjectApi(Protocol):
    """The object verbs the controller, its event recorder and the queue writers use.

    `KubeApi` implements it over HTTP; unit tests pass an in-memory one, so both are checked
    against the same signatures.
    """

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        ...

    def list_objects(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        ...

    def list_with_version(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Listing:
        ...

    def create(
        self, kind: Kind, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        ...

    def apply(self, kind: Kind, body: Mapping[str, Any], force: bool = True) -> dict[str, Any]:
        ...

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        ...

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, uid: str | None = None
    ) -> bool:
        ...


class FencedError(Exception):
    """The fence refused a write at the last moment, on the connection (see `_FencedSend`).

    Deliberately not an OSError / HTTPException / urllib3 error: urllib3 would take those for
    a broken connection and retry the request, and KubeApi for a retryable failure.
    """


def _not_leader(method: str, path: str) -> ApiError:
    return ApiError(FENCED, "NotLeader", "write refused: this process is not the leader",
                    method, path)


class _FencedSend(HTTPConnection):
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


def _fenced_manager(
    shared: urllib3.PoolManager, fence: Callable[[], bool]
) -> urllib3.PoolManager:
    """A copy of the client's pool manager (same TLS, proxy, retries and pool size) whose pools
    are its own and make `_FencedSend` connections asking `fence`.

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
            (_FencedSend, pool_cls.ConnectionCls),
            {"fence": staticmethod(fence)},
        )
        classes[scheme] = type(
            f"Fenced{pool_cls.__name__}", (pool_cls,), {"ConnectionCls": connection_cls}
        )
    manager.pool_classes_by_scheme = classes
    return manager


class _Transport:
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
            self.manager = _fenced_manager(self.manager, fence)
        self.direct = type(self.manager) is urllib3.PoolManager  # (a proxy manager: by URL)
        self.pool = self.manager.connection_from_url(self.host) if self.direct else None
        self.headers = {str(k): str(v) for k, v in api_client.default_headers.items()}
        if api_client.cookie:
            self.headers["Cookie"] = str(api_client.cookie)
        self.timeout = urllib3.Timeout(total=timeout)
        self.retries = URLLIB3_RETRIES

    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> urllib3.BaseHTTPResponse:
        auth = self.configuration.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers[auth["key"]] = auth["value"]
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


class KubeApi:
    """Dict-in, dict-out REST calls with typed errors.

    `fence`, when given, is asked before every write (early, and again on the connection
    right before the bytes are sent: see the module docstring); a write it refuses raises a
    `fenced` ApiError without reaching the server (leader election: a deposed leader writes
    nothing after its fence shut, but for the microsecond-wide send window).

    An answer that says when to come back (a 429 or 5xx with `Retry-After`: APF throttling,
    max-in-flight, a timeout) is retried here after that wait, up to MAX_RETRIES times, while
    the waits fit within `timeout` of the first attempt, as client-go's rest client retries a
    request (rest/with_retry.go); the fence is asked again for each attempt. The last such
    answer goes up as an ApiError with its `retry_after`, which the callers' own retry
    loops wait out in turn.
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        timeout: float = 30.0,
        fence: Callable[[], bool] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api_client = api_client
        self.timeout = timeout
        self.fence = fence
        self._sleep = sleep
        self._transport: _Transport | None = None
        """Built on first request (the constructor does not touch the client)."""
        self._generated: bool | None = None
        """The client has no urllib3 pool (a test double): requests go through its call_api."""

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        query: Iterable[tuple[str, str]] = (),
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        pairs = list(query)
        budget = time.monotonic() + self.timeout
        for retries in range(MAX_RETRIES + 1):
            try:
                return self._attempt(method, path, body, pairs, content_type)
            except ApiError as exc:
                wait = exc.wait_hint
                if (exc.retry_after is None or retries == MAX_RETRIES
                        or time.monotonic() + wait > budget):
                    raise
                log.debug("retrying after the server's Retry-After", error=str(exc), in_s=wait)
                self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(
        self,
        method: str,
        path: str,
        body: object,
        query: list[tuple[str, str]],
        content_type: str,
    ) -> dict[str, Any]:
        """One attempt of `request`."""
        fence = None if method == "GET" else self.fence
        if fence is not None and not fence():  # early: saves the work when already shut
            raise _not_leader(method, path)
        generated = self._generated
        if generated is None:
            client = self.api_client
            generated = self._generated = not hasattr(
                getattr(client, "rest_client", None), "pool_manager"
            )
        if not generated:
            return self._request(method, path, body, query, content_type)
        headers = {"Accept": "application/json", "Content-Type": content_type}
        serialized = self.api_client.param_serialize(
            method,
            path,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        if fence is not None and not fence():  # serialised: the last moment we see here
            raise _not_leader(method, path)
        try:
            response = self.api_client.call_api(*serialized, _request_timeout=self.timeout)
            response.read()  # type: ignore[no-untyped-call]
        except ApiException as exc:
            raise _api_error(
                exc.status or 0, exc.reason or "", exc.body, method, path, exc.headers
            ) from exc
        except Exception as exc:  # connection refused, TLS, timeouts: all retryable
            raise ApiError(0, type(exc).__name__, str(exc), method, path) from exc
        data = response.data or b"{}"
        if not 200 <= response.status < 300:
            raise _api_error(
                response.status, response.reason or "", data, method, path,
                getattr(response, "headers", None),
            )
        parsed: dict[str, Any] = loads(data) if data else {}
        return parsed

    def _request(
        self,
        method: str,
        path: str,
        body: object,
        query: list[tuple[str, str]],
        content_type: str,
    ) -> dict[str, Any]:
        """One attempt through the pool (see the module docstring)."""
        transport = self._transport
        if transport is None:
            transport = self._transport = _Transport(self.api_client, self.timeout, self.fence)
        pairs = query
        target = f"{path}?{urlencode(pairs, quote_via=quote)}" if pairs else path
        headers = {**transport.headers, "Accept": "application/json"}
        data: bytes | None = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        try:
            response = transport.send(method, target, data, headers)
        except FencedError:
            raise _not_leader(method, path) from None
        except Exception as exc:  # connection refused, TLS, timeouts: all retryable
            raise ApiError(0, type(exc).__name__, str(exc), method, path) from exc
        raw = response.data or b"{}"
        if not 200 <= response.status < 300:
            raise _api_error(
                response.status, response.reason or "", raw, method, path, response.headers
            )
        parsed: dict[str, Any] = loads(raw)
        return parsed

    # --- verbs ------------------------------------------------------------------------------
    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.request("GET", kind.path(namespace, name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def list_objects(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        return self.list_with_version(kind, namespace, label_selector, field_selector)[0]

    def list_with_version(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Listing:
        """All objects (following `continue` pages) and the list's resourceVersion to watch from."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query = [("limit", "500")]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if token:
                query.append(("continue", token))
            page = self.request("GET", kind.path(namespace), query=query)
            for item in page.get("items") or []:
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind.kind)
                items.append(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                # every page of a paginated list carries the one snapshot's resourceVersion
                return items, str((page.get("metadata") or {}).get("resourceVersion") or "")

    def create(
        self, kind: Kind, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        return self.request(
            "POST", kind.path(namespace), body=dict(body), query=[("fieldManager", FIELD_MANAGER)]
        )

    def apply(self, kind: Kind, body: Mapping[str, Any], force: bool = True) -> dict[str, Any]:
        """Server-side apply: we own exactly the fields in `body`; others' fields survive."""
        metadata = body["metadata"]
        query = [("fieldManager", FIELD_MANAGER)]
        if force:
            query.append(("force", "true"))
        return self.request(
            "PATCH",
            kind.path(metadata.get("namespace"), metadata["name"]),
            body=dict(body),
            query=query,
            content_type="application/apply-patch+yaml",
        )

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """A JSON merge patch; put metadata.resourceVersion in `patch` to make it conditional."""
        return self.request(
            "PATCH",
            kind.path(namespace, name, subresource),
            body=dict(patch),
            query=[("fieldManager", FIELD_MANAGER)],
            content_type="application/merge-patch+json",
        )

    def json_patch(
        self,
        kind: Kind,
        name: str,
        ops: list[dict[str, Any]],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return self.request(
            "PATCH",
            kind.path(namespace, name, subresource),
            body=ops,
            query=[("fieldManager", FIELD_MANAGER)],
            content_type="application/json-patch+json",
        )

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, uid: str | None = None
    ) -> bool:
        """Delete (optionally only if the UID still matches); False when already gone."""
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", kind.path(namespace, name), body=body)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True


_stamp: list[tuple[int, str]] = [(0, "")]


def now_rfc3339() -> str:
    """The API's RFC 3339 time to the second (Event and status timestamps), formatted once
    per second: every admission writes two and strftime showed in the controller's profile."""
    second = int(time.time())
    cached = _stamp[0]
    if cached[0] != second:
        cached = _stamp[0] = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return cached[1]


def _api_error(  # noqa: PLR0917 (the answer's parts, in the order they come)
    status: int,
    reason: str,
    body: object,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
) -> ApiError:
    message = ""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body:
        try:
            message = str(json.loads(body).get("message") or body)
        except (ValueError, AttributeError):
            message = body
    return ApiError(
        status, reason, message, method, path,
        retry_after=retry_after(status, headers),
        flow_schema=str((headers or {}).get(FLOW_SCHEMA_UID) or ""),
        priority_level=str((headers or {}).get(PRIORITY_LEVEL_UID) or ""),
    )


def with_retries(
    call: Callable[[], T],
    attempts: int = 5,
    base_delay: float = 0.1,
    retry_conflicts: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `call`, retrying transient errors (and conflicts, whose caller re-reads) with backoff.

    A throttled or failing answer's `Retry-After` is waited out when longer than the back-off
    step, as client-go's request retry waits max(back-off, Retry-After): retrying a 429 after
    0.1 s only adds to the load the server is shedding.
    """
    for attempt in range(attempts):
        try:
            return call()
        except ApiError as exc:
            last = attempt == attempts - 1
            if last or not (exc.retryable or (retry_conflicts and exc.conflict)):
                raise
            sleep(max(Backoff(base_delay).delay(attempt), exc.wait_hint))
    raise AssertionError("unreachable")  # pragma: no cover


def retry_transient(
    call: Callable[[], T],
    schedule: Backoff,
    stopped: Callable[[float], bool],
    on_retry: Callable[[Exception, float], None],
) -> T:
    """`call` until it answers, retrying transient ApiErrors (429, 5xx, a lost connection)
    after `schedule`'s delays for as long as it takes, as client-go's reflector retries its
    list: the start-ups of the controller and the scheduler (kopf would retry a failed
    start-up only after 60 s). Other errors go up at once; so does the last one when
    `stopped(delay)` says the process is shutting down. A `Retry-After` longer than the
    schedule's step is waited out instead."""
    return retry(call, schedule, _transient, stopped, on_retry, at_least=wait_hint)


def _transient(exc: Exception) -> bool:
    return isinstance(exc, ApiError) and exc.retryable
