"""Prometheus metrics: what an operator graphs and alerts on."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Final
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from koordqueue.domain.quantity import NANO
from koordqueue.domain.quota_tree import QuotaUsage

REGISTRY: Final = CollectorRegistry()

UNITS_PENDING: Final = Gauge(
    "koordqueue_units_pending",
    "QueueUnits waiting for admission, per queue.",
    ["queue"],
    registry=REGISTRY,
)
UNITS_ADMITTED: Final = Gauge(
    "koordqueue_units_admitted",
    "QueueUnits admitted and holding quota, per queue.",
    ["queue"],
    registry=REGISTRY,
)
UNITS_UNMAPPED: Final = Gauge(
    "koordqueue_units_unmapped",
    "QueueUnits that can never be admitted because their quota label is missing or invalid.",
    ["reason"],
    registry=REGISTRY,
)
UNITS_QUEUE_NOT_FOUND: Final = Gauge(
    "koordqueue_units_queue_not_found",
    "QueueUnits whose quota/queue does not exist.",
    registry=REGISTRY,
)
ADMISSIONS: Final = Counter(
    "koordqueue_admissions_total", "Units admitted, per queue.", ["queue"], registry=REGISTRY
)
REJECTIONS: Final = Counter(
    "koordqueue_rejections_total",
    "CheckUsage rejections, per queue and kind.",
    ["queue", "kind"],
    registry=REGISTRY,
)
ADMISSION_LATENCY: Final = Histogram(
    "koordqueue_admission_latency_seconds",
    "From QueueUnit creation to admission.",
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600),
    registry=REGISTRY,
)
ROUND_DURATION: Final = Histogram(
    "koordqueue_admission_round_seconds",
    "Duration of one admission round including its API writes.",
    registry=REGISTRY,
)
API_ERRORS: Final = Counter(
    "koordqueue_api_errors_total",
    "Failed API calls by operation.",
    ["operation"],
    registry=REGISTRY,
)

WATCH_RESTARTS: Final = Counter(
    "koordqueue_watch_restarts_total",
    "Informer watches restarted, per kind and reason (expired: re-listed after 410 Gone).",
    ["kind", "reason"],
    registry=REGISTRY,
)
INFORMER_BACKLOG: Final = Gauge(
    "koordqueue_informer_backlog",
    "Watch events received and not yet handled, per kind (a growing value: handlers lag).",
    ["kind"],
    registry=REGISTRY,
)
HANDLER_ERRORS: Final = Counter(
    "koordqueue_event_handler_errors_total",
    "Watch events whose handler raised (the object is handled again at the next event or resync).",
    ["kind"],
    registry=REGISTRY,
)

QUOTA_USED: Final = Gauge(
    "koordqueue_quota_used",
    "Admitted usage per quota and resource (cpu in cores, others in base units), split as "
    "Koord-Queue's ElasticQuotaInfo: part total (whole subtree), self (units of this quota), "
    "children (units of its descendants), guaranteed and oversold (unit annotation "
    "quota.scheduling.koordinator.sh/actual-quota-oversold-type=ForceQuotaOverSold).",
    ["quota", "resource", "part"],
    registry=REGISTRY,
)
QUOTA_USAGE_INTERVAL: Final = 5.0
"""Seconds between quota usage exports (Koord-Queue refreshes its usage gauge every 5 s)."""


class Cadence:
    """True at most once per `interval` seconds, and on the first call.

    Each caller owns its own: a cadence shared through module state lets one controller's
    round use up another's turn (two controllers in one process, or a test after a test).
    """

    def __init__(
        self, interval: float = QUOTA_USAGE_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._interval = interval
        self._clock = clock
        self._last: float | None = None

    def due(self) -> bool:
        now = self._clock()
        if self._last is not None and now - self._last < self._interval:
            return False
        self._last = now
        return True


class QuotaUsageExporter:
    """Sets `koordqueue_quota_used` from the tree's report; series that disappeared go.

    Callers throttle with their own `Cadence` because the report costs O(quotas) and rounds
    can be frequent.
    """

    def __init__(self) -> None:
        self._series: set[tuple[str, str, str]] = set()

    def export(self, rows: Iterable[QuotaUsage]) -> None:
        series: set[tuple[str, str, str]] = set()
        for row in rows:
            split = row.split
            if split is None:
                continue
            parts = {
                "total": split.used, "self": split.self_used, "children": split.children_used,
                "guaranteed": split.guaranteed_used, "oversold": split.oversold_used,
            }
            for res in set(split.used) | set(row.max):
                for part, amounts in parts.items():
                    QUOTA_USED.labels(row.name, res, part).set(amounts.get_nanos(res) / NANO)
                    series.add((row.name, res, part))
        for gone in self._series - series:
            QUOTA_USED.remove(*gone)
        self._series = series


QUOTA_USAGE: Final = QuotaUsageExporter()


def serve(port: int, addr: str = "0.0.0.0") -> WSGIServer | None:
    """Expose /metrics on `port` (0 disables); the server, so a test can shut it down."""
    if not port:
        return None
    server, _ = start_http_server(port, addr, registry=REGISTRY)
    return server
