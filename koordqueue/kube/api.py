"""The only place that talks to the Kubernetes API for writes and lists.

Objects are plain dicts (the JSON the API server speaks), so the pure core can consume them
unchanged. Built on `kubernetes.client.ApiClient` for configuration, auth and TLS; requests
go through its urllib3 connection pool with JSON bodies, which keeps server-side apply,
JSON/merge patch and optimistic concurrency (resourceVersion preconditions) explicit.

The connection layer (the pool of the API server's host and the leader-election fence asked
on the connection right before a write's bytes go out) is `transport.py`; the typed errors
and the retry helpers are `api_errors.py` (both re-exported here).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import quote, urlencode

import structlog
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from koordqueue import __version__
from koordqueue.domain import names
from koordqueue.kube.api_errors import (
    FENCED,
    FLOW_SCHEMA_UID,
    PRIORITY_LEVEL_UID,
    RETRY_AFTER,
    RETRY_AFTER_CAP,
    ApiError,
    api_error,
    retry_after,
    retry_transient,
    wait_hint,
    with_retries,
)
from koordqueue.kube.curl_transport import ACCEPT_ENCODING, CurlTransport, usable
from koordqueue.kube.transport import FencedError, Transport, not_leader
from koordqueue.kube.wire import dumps, loads, without_managed_fields

__all__ = [
    "ELASTIC_QUOTA",
    "EVENT",
    "FENCED",
    "FIELD_MANAGER",
    "FLOW_SCHEMA_UID",
    "JOB",
    "MAX_RETRIES",
    "METADATA_ONLY",
    "NAMESPACE",
    "NODE",
    "POD",
    "POD_DISRUPTION_BUDGET",
    "POD_GROUP",
    "PRIORITY_CLASS",
    "PRIORITY_LEVEL_UID",
    "QUEUE",
    "QUEUE_UNIT",
    "RETRY_AFTER",
    "RETRY_AFTER_CAP",
    "VOLCANO_QUEUE",
    "ApiError",
    "FencedError",
    "Kind",
    "KubeApi",
    "KubeconfigError",
    "Listing",
    "ObjectApi",
    "dumps",
    "load_api_client",
    "loads",
    "now_rfc3339",
    "retry_after",
    "retry_transient",
    "wait_hint",
    "with_retries",
    "without_managed_fields",
]
# (the errors and retry helpers are api_errors', FencedError transport's, the JSON codec
# wire's: re-exported, callers take everything of the API from here)

log = structlog.get_logger(__name__)
FIELD_MANAGER: Final = "koordqueue"
MAX_RETRIES: Final = 10
"""Answers with a `Retry-After` a request retries by itself (client-go rest's maxRetries)."""
METADATA_ONLY: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
"""Accept header of a list whose items carry only their metadata (client-go's metadata client)."""
T = TypeVar("T")
Listing = tuple[list[dict[str, Any]], str]
"""Objects of one kind and the list's resourceVersion, to watch from."""


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
ADMISSION_CHECKS: Final = tuple(
    Kind("kueue.x-k8s.io", version, "admissionchecks", "AdmissionCheck", namespaced=False)
    for version in ("v1beta2", "v1beta1")
)
"""Kueue's AdmissionCheck, newest served version first (v0.17 stores v1beta2; older v1beta1)."""
EVENT: Final = Kind("", "v1", "events", "Event")
POD: Final = Kind("", "v1", "pods", "Pod")
NODE: Final = Kind("", "v1", "nodes", "Node", namespaced=False)
POD_DISRUPTION_BUDGET: Final = Kind(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"
)
NAMESPACE: Final = Kind("", "v1", "namespaces", "Namespace", namespaced=False)
RESOURCE_QUOTA: Final = Kind("", "v1", "resourcequotas", "ResourceQuota")
PRIORITY_CLASS: Final = Kind("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
POD_GROUP: Final = Kind(
    names.VOLCANO_GROUP, names.VOLCANO_VERSION, names.POD_GROUP_PLURAL, "PodGroup"
)
NUMATOPOLOGY: Final = Kind(
    names.NODEINFO_GROUP, names.NODEINFO_VERSION, names.NUMATOPOLOGY_PLURAL, "Numatopology",
    namespaced=False,
)
HYPER_NODE: Final = Kind(
    names.TOPOLOGY_GROUP, names.TOPOLOGY_VERSION, names.HYPER_NODE_PLURAL, "HyperNode",
    namespaced=False,
)
VOLCANO_QUEUE: Final = Kind(
    names.VOLCANO_GROUP,
    names.VOLCANO_VERSION,
    names.VOLCANO_QUEUE_PLURAL,
    "Queue",
    namespaced=False,
)


class KubeconfigError(k8s_config.ConfigException):
    """A kubeconfig that cannot be used, with its path in the message (the client's own
    errors, e.g. "Invalid kube-config file. No configuration found.", name no file)."""


def process_identity() -> str:
    """This process, unique on the cluster: the pod's hostname plus the pid (two processes on
    one host differ). The leader-election identity, and part of the user agent."""
    return f"{socket.gethostname()}_{os.getpid()}"


def user_agent() -> str:
    """`koordqueue/<version> (<identity>)`: the API server's audit log then says which replica
    sent each request, and the Lease's `holderIdentity` which one led when it did."""
    return f"koordqueue/{__version__} ({process_identity()})"


def load_api_client(
    kubeconfig: str | None = None, context: str | None = None, pool_size: int = 48
) -> k8s_client.ApiClient:
    """An ApiClient from the given kubeconfig, $KUBECONFIG/~/.kube/config, or in-cluster config.

    `pool_size` caps the kept-alive connections: size it to the threads that call the API at
    once (the client's default, 10, makes a busy controller re-open connections). A missing
    or unusable kubeconfig raises KubeconfigError naming the file. Requests carry
    `user_agent()`.
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
    client = k8s_client.ApiClient(configuration)
    client.user_agent = user_agent()
    return client


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
        *,
        metadata_only: bool = False,
    ) -> Listing:
        """`metadata_only`: each item is its PartialObjectMetadata (metadata, no spec or
        status), as the API server sends it for METADATA_ONLY."""
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


class KubeApi:
    """Dict-in, dict-out REST calls with typed errors.

    `fence`, when given, is asked before every write (early, and again on the connection
    right before the bytes are sent: see transport.py); a write it refuses raises a
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
        self._transport: Transport | CurlTransport | None = None
        """Built on first request (the constructor does not touch the client)."""
        self._generated: bool | None = None
        """The client has no urllib3 pool (a test double): requests go through its call_api."""

    def with_timeout(self, timeout: float) -> KubeApi:
        """The same client and fence (and connection pool) with another request timeout."""
        return KubeApi(self.api_client, timeout, self.fence, self._sleep)

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        query: Iterable[tuple[str, str]] = (),
        content_type: str = "application/json",
        *,
        accept: str = "application/json",
        gzip: bool = False,
    ) -> dict[str, Any]:
        """`gzip`: ask for the answer gzip-encoded (decoded here), for long answers that cross
        a network, as the visibility API's."""
        pairs = list(query)
        budget = time.monotonic() + self.timeout
        for retries in range(MAX_RETRIES + 1):
            try:
                return self._attempt(method, path, body, pairs, content_type, accept=accept,
                                     gzip=gzip)
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
        *,
        accept: str = "application/json",
        gzip: bool = False,
    ) -> dict[str, Any]:
        """One attempt of `request`."""
        fence = None if method == "GET" else self.fence
        if fence is not None and not fence():  # early: saves the work when already shut
            raise not_leader(method, path)
        generated = self._generated
        if generated is None:
            client = self.api_client
            generated = self._generated = not hasattr(
                getattr(client, "rest_client", None), "pool_manager"
            )
        if not generated:
            return self._request(method, path, body, query, content_type, accept=accept,
                                 gzip=gzip)
        headers = {"Accept": accept, "Content-Type": content_type}
        if gzip:
            headers[ACCEPT_ENCODING] = "gzip"
        serialized = self.api_client.param_serialize(
            method,
            path,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        if fence is not None and not fence():  # serialised: the last moment we see here
            raise not_leader(method, path)
        try:
            response = self.api_client.call_api(*serialized, _request_timeout=self.timeout)
            response.read()  # type: ignore[no-untyped-call]
        except ApiException as exc:
            raise api_error(
                exc.status or 0, exc.reason or "", exc.body, method, path, exc.headers
            ) from exc
        except Exception as exc:  # connection refused, TLS, timeouts: all retryable
            raise ApiError(0, type(exc).__name__, str(exc), method, path) from exc
        data = response.data or b"{}"
        if not 200 <= response.status < 300:
            raise api_error(
                response.status, response.reason or "", data, method, path,
                getattr(response, "headers", None),
            )
        parsed: dict[str, Any] = without_managed_fields(loads(data)) if data else {}
        return parsed

    def _request(
        self,
        method: str,
        path: str,
        body: object,
        query: list[tuple[str, str]],
        content_type: str,
        *,
        accept: str = "application/json",
        gzip: bool = False,
    ) -> dict[str, Any]:
        """One attempt through libcurl (curl_transport.py), or urllib3's pool where libcurl
        cannot make the same connection (a proxy, a TLS server name: transport.py)."""
        transport = self._transport
        if transport is None:
            chosen = CurlTransport if usable(self.api_client) else Transport
            transport = self._transport = chosen(self.api_client, self.timeout, self.fence)
        pairs = query
        target = f"{path}?{urlencode(pairs, quote_via=quote)}" if pairs else path
        headers = {**transport.headers, "Accept": accept}
        if gzip:
            headers[ACCEPT_ENCODING] = "gzip"
        data: bytes | None = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = dumps(body)
        try:
            response = transport.send(method, target, data, headers)
        except FencedError:
            raise not_leader(method, path) from None
        except Exception as exc:  # connection refused, TLS, timeouts: all retryable
            raise ApiError(0, type(exc).__name__, str(exc), method, path) from exc
        raw = response.data or b"{}"
        if not 200 <= response.status < 300:
            raise api_error(
                response.status, response.reason or "", raw, method, path, response.headers
            )
        parsed: dict[str, Any] = without_managed_fields(loads(raw))
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
        *,
        metadata_only: bool = False,
    ) -> Listing:
        """All objects (following `continue` pages) and the list's resourceVersion to watch from.

        `metadata_only`: PartialObjectMetadata items (what a metadata informer reads): no spec
        or status, but managedFields stay (1,068 -> 919 bytes for a waiting QueueUnit)."""
        accept = METADATA_ONLY if metadata_only else "application/json"
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
            page = self.request("GET", kind.path(namespace), query=query, accept=accept)
            for item in page.get("items") or []:
                if not metadata_only:
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


