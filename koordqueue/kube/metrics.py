"""Prometheus metrics: what an operator graphs and alerts on."""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

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


def serve(port: int) -> None:
    """Expose /metrics on `port` (0 disables)."""
    if port:
        start_http_server(port, registry=REGISTRY)
