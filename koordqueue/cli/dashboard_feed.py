"""The dashboard's live copy of the cluster: list + watch, and the visibility API's answer.

Quotas, Queues, QueueUnits and Events are listed and watched with the controller's own
informer (kube/informer.py: resumes from the last resourceVersion, re-lists on 410). The
pending order (and the count per quota) is the visibility API's (the controller's last
round): it has no watch, so it is asked again shortly after any watched change and every
`interval` seconds (a round may change a reason without any object changing). Of the
Events, only the controller's are kept. Each time what the page shows changes, the state
gets a new version and every waiting page stream is woken.

Read-only: the only requests are GETs: the informers list and watch, and everything else
goes through `ReadOnlyApi`, which has no method that writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson
import structlog

from koordqueue.cli.dashboard_model import dashboard_state, is_controller_event
from koordqueue.domain import names
from koordqueue.kube.api import (
    ELASTIC_QUOTA,
    EVENT,
    QUEUE,
    QUEUE_UNIT,
    ApiError,
    Kind,
    KubeApi,
    Listing,
)
from koordqueue.kube.informer import Informer

log = structlog.get_logger(__name__)

WATCHED: Final = (ELASTIC_QUOTA, QUEUE, QUEUE_UNIT, EVENT)
VISIBILITY: Final = f"/apis/{names.VISIBILITY_GROUP}/{names.VISIBILITY_VERSION}"
VISIBILITY_PATH: Final = f"{VISIBILITY}/{names.VISIBILITY_PENDING}"
VISIBILITY_QUOTAS_PATH: Final = f"{VISIBILITY}/{names.VISIBILITY_QUOTAS}"
PENDING_LIMIT: Final = 5000
"""Pending units asked of the visibility API per refresh (the page shows the head of each
queue; the total is the answer's)."""
SETTLE: Final = 0.1
"""Seconds to wait after a watched change before refreshing, so a burst is one refresh."""
MSG_NO_VISIBILITY: Final = (
    "the visibility API did not answer ({error}): pending order and reasons are unknown "
    "(is the controller running with --visibility-port, and is apiservice "
    f"{names.VISIBILITY_VERSION}.{names.VISIBILITY_GROUP} Available?)"
)


class ReadOnlyApi:
    """The GETs the dashboard makes, and nothing else (it never writes to the cluster)."""

    def __init__(self, api: KubeApi) -> None:
        self._api = api

    def list_with_version(self, kind: Kind, namespace: str | None = None) -> Listing:
        return self._api.list_with_version(kind, namespace)

    def get(self, path: str, query: Mapping[str, str] | None = None) -> dict[str, Any]:
        # the visibility API's answers are megabytes of JSON: asked for gzipped
        return self._api.request("GET", path, query=list((query or {}).items()),
                                 gzip=path.startswith(VISIBILITY))


class DashboardFeed:
    """`start()` lists and watches; `state(after, timeout)` waits for a newer state."""

    def __init__(
        self,
        api: KubeApi,
        *,
        queue_namespace: str = names.QUEUE_NAMESPACE,
        interval: float = 2.0,
        cluster: str = "",
        informer: Callable[..., Any] = Informer,
    ) -> None:
        self.api = ReadOnlyApi(api)
        self.queue_namespace = queue_namespace
        self.interval = interval
        self.cluster = cluster
        self._objects: dict[str, dict[str, dict[str, Any]]] = {k.plural: {} for k in WATCHED}
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._published = threading.Condition()
        self._version = 0
        self._body = b"{}"
        self._shown: dict[str, Any] | None = None
        self._informers = [
            informer(api, kind, self._handler(kind.plural), workers=1) for kind in WATCHED
        ]
        self._thread: threading.Thread | None = None

    # --- objects ------------------------------------------------------------------------
    def _handler(self, plural: str) -> Callable[[str | None, dict[str, Any]], None]:
        def handle(event_type: str | None, obj: dict[str, Any]) -> None:
            meta = obj.get("metadata") or {}
            key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            with self._lock:
                if event_type == "DELETED" or (plural == EVENT.plural
                                               and not is_controller_event(obj)):
                    self._objects[plural].pop(key, None)
                else:
                    self._objects[plural][key] = obj
            self._changed.set()

        return handle

    def objects(self, kind: Kind) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects[kind.plural].values())

    # --- lifecycle ----------------------------------------------------------------------
    def start(self, synced_within: float = 30.0) -> None:
        """Start watching; returns once every kind was listed (or `synced_within` passed)."""
        for inf in self._informers:
            inf.start()
        deadline = time.monotonic() + synced_within
        for inf in self._informers:
            inf.synced.wait(max(0.0, deadline - time.monotonic()))
        self.refresh()
        self._thread = threading.Thread(target=self._run, name="kq-dashboard", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._changed.set()
        for inf in self._informers:
            inf.stop(timeout=2.0)
        with self._published:
            self._published.notify_all()
        if self._thread is not None:
            self._thread.join(5.0)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._changed.wait(self.interval):
                self._stop.wait(SETTLE)
            self._changed.clear()
            if self._stop.is_set():
                return
            try:
                self.refresh()
            except Exception:  # a bad object must not end the live view
                log.exception("dashboard refresh failed")

    # --- the state ----------------------------------------------------------------------
    def _pending(self) -> tuple[dict[str, Any] | None, dict[str, int] | None, str | None]:
        """(the pending units, the count per quota, why they are unknown)."""
        try:
            pending = self.api.get(VISIBILITY_PATH, {"limit": str(PENDING_LIMIT)})
            quotas = self.api.get(VISIBILITY_QUOTAS_PATH)
        except ApiError as exc:
            return None, None, MSG_NO_VISIBILITY.format(error=exc.message or exc.reason or exc)
        counts = {str(i["metadata"]["name"]): int(i.get("pending") or 0)
                  for i in quotas.get("items") or []}
        return pending, counts, None

    def refresh(self) -> bool:
        """Read the pending order, build the state; publish it if what is shown changed."""
        pending, counts, error = self._pending()
        state = dashboard_state(
            self.objects(ELASTIC_QUOTA), self.objects(QUEUE), self.objects(QUEUE_UNIT),
            self.objects(EVENT), pending, quota_pending=counts, pending_error=error,
            queue_namespace=self.queue_namespace, cluster=self.cluster,
        )
        return self.publish(state)

    def publish(self, state: Mapping[str, Any]) -> bool:
        with self._published:
            if state == self._shown:
                return False
            self._shown = dict(state)
            self._version += 1
            stamped = {**state, "version": self._version,
                       "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            self._body = orjson.dumps(stamped)
            self._published.notify_all()
            return True

    def state(self, after: int = 0, timeout: float = 0.0) -> tuple[int, bytes]:
        """(version, JSON) of the state, once it is newer than `after` or `timeout` passed
        (then the version is `after` again: nothing new)."""
        with self._published:
            self._published.wait_for(
                lambda: self._version > after or self._stop.is_set(), timeout
            )
            if self._version > after:
                return self._version, self._body
            return after, b""
