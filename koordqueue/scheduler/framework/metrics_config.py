"""The scheduler conf's `metrics` section (Volcano's MetricsConfiguration): where node load
comes from for the `usage` and `rescheduling` plugins.

    metrics:
      type: prometheus            # prometheus (default), prometheus_adaptor, metrics_server
      address: http://prometheus.monitoring:9090
      interval: 30s               # how often readings are pulled
      tls: {insecureSkipVerify: "false"}

Refused at load, naming the field: an unknown type, a missing address where the type needs
one, a malformed interval. `elasticsearch` is Volcano's third type; koordqueue does not read
Elasticsearch and says so rather than running without load data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from koordqueue.domain.queue_items import parse_go_duration
from koordqueue.scheduler.api import load_names as ln


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """Where and how often node load is read."""

    type: str = ln.METRICS_PROMETHEUS
    address: str = ""
    interval: float = ln.METRICS_DEFAULT_INTERVAL
    insecure_skip_verify: bool = False


def parse_metrics(raw: object) -> MetricsConfig:
    """The section as a MetricsConfig; ValueError saying which field is wrong and why."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"'{ln.METRICS}' must be a map, got {type(raw).__name__}")
    kind = str(raw.get("type") or ln.METRICS_PROMETHEUS).strip()
    if kind == ln.METRICS_ELASTICSEARCH:
        raise ValueError(f"{ln.METRICS}.type {kind!r} is not supported by koordqueue "
                         f"(use one of: {', '.join(ln.METRICS_TYPES)})")
    if kind not in ln.METRICS_TYPES:
        raise ValueError(f"{ln.METRICS}.type: unknown type {kind!r} "
                         f"(known: {', '.join(ln.METRICS_TYPES)})")
    address = str(raw.get("address") or "").strip()
    if kind == ln.METRICS_PROMETHEUS and not address:
        raise ValueError(f"{ln.METRICS}.address: metrics address is empty")
    interval = ln.METRICS_DEFAULT_INTERVAL
    text = raw.get("interval")
    if text not in (None, ""):
        try:
            interval = parse_go_duration(str(text))
        except ValueError as exc:
            raise ValueError(f"{ln.METRICS}.interval: {exc}") from exc
        if interval <= 0:
            raise ValueError(f"{ln.METRICS}.interval: must be > 0, got {text!r}")
    tls = raw.get("tls") or {}
    skip = False
    if isinstance(tls, Mapping):
        value = tls.get("insecureSkipVerify")
        skip = value is True or str(value).strip().lower() == "true"
    return MetricsConfig(kind, address, interval, skip)
