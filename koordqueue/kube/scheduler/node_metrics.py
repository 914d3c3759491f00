"""Node load for the `usage` and `rescheduling` plugins, pulled from the source the conf's
`metrics` section names, every `metrics.interval`, off the session's path.

Sources, as Volcano's pkg/scheduler/metrics/source reads them:
- `prometheus`: two instant queries per node at `<address>/api/v1/query`, cpu and memory
  use in percent averaged over the last 10 minutes at a 30 s step (node-exporter series
  labelled `instance=<node name>`); the reading's time is the query's.
- `prometheus_adaptor`: the custom metrics API's root-scoped Node metrics
  `node_cpu_usage_avg` and `node_memory_usage_avg` (fractions) through the API server.
- `metrics_server` (koordqueue's own): metrics.k8s.io NodeMetrics' cpu and memory over the
  node's allocatable: a point-in-time reading, not an average.
A failed pull is logged and the last readings are kept (stale ones stop counting after five
minutes, so a dead source never keeps refusing nodes).
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import structlog

from koordqueue.domain.quantity import parse_nanos
from koordqueue.kube.api_errors import ApiError
from koordqueue.kube.scheduler.convert import timestamp
from koordqueue.scheduler.api import load_names as ln
from koordqueue.scheduler.api.node_usage import NodeUsage
from koordqueue.scheduler.framework.metrics_config import MetricsConfig

log = structlog.get_logger(__name__)

CPU_QUERY = (
    'avg_over_time((100 - (avg by (instance) (irate(node_cpu_seconds_total'
    '{{mode="idle",instance="{node}"}}[5m])) * 100))[{period}:30s])'
)
MEMORY_QUERY = (
    'avg_over_time((100 * (1 - node_memory_MemAvailable_bytes{{instance="{node}"}}'
    ' / node_memory_MemTotal_bytes{{instance="{node}"}}))[{period}:30s])'
)
ADAPTOR_PATH = "/apis/custom.metrics.k8s.io/v1beta1/nodes/*/{metric}"
METRICS_SERVER_PATH = "/apis/metrics.k8s.io/v1beta1/nodes"
Allocatable = Mapping[str, tuple[int, int]]
"""Node name -> (cpu, memory) allocatable in nano-units (what metrics_server divides by)."""


class MetricsError(Exception):
    """A pull that gave nothing usable; the message names the source and why."""


class MetricsSource(Protocol):
    def read(self, nodes: Allocatable) -> dict[str, NodeUsage]:
        """Readings of the nodes named (others are left out); MetricsError when none."""
        ...


class RawGet(Protocol):
    def request(self, method: str, path: str) -> dict[str, Any]:
        ...


class PrometheusSource:
    """Volcano's `prometheus` type."""

    def __init__(self, config: MetricsConfig, timeout: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.base = config.address.rstrip("/")
        self.timeout = timeout
        self.clock = clock
        self.context: ssl.SSLContext | None = None
        if config.insecure_skip_verify:
            self.context = ssl.create_default_context()
            self.context.check_hostname = False
            self.context.verify_mode = ssl.CERT_NONE

    def query(self, promql: str) -> float | None:
        """The first sample's value of an instant query; None for an empty result."""
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=self.timeout,
                                        context=self.context) as response:
                body = json.loads(response.read())
        except (OSError, ValueError) as exc:
            raise MetricsError(f"prometheus {self.base}: {exc}") from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            raise MetricsError(f"prometheus {self.base}: query failed: "
                               f"{body.get('error') if isinstance(body, dict) else body!r}")
        result = (body.get("data") or {}).get("result") or []
        if not result:
            return None
        try:
            return float(result[0]["value"][1])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise MetricsError(f"prometheus {self.base}: unreadable sample {result[0]!r}") from exc

    def read(self, nodes: Allocatable) -> dict[str, NodeUsage]:
        out: dict[str, NodeUsage] = {}
        for name in sorted(nodes):
            at = self.clock()
            cpu = self.query(CPU_QUERY.format(node=name, period=ln.METRICS_PERIOD))
            memory = self.query(MEMORY_QUERY.format(node=name, period=ln.METRICS_PERIOD))
            if cpu is None or memory is None:
                log.info("prometheus has no load series for the node", node=name,
                         cpu=cpu is not None, memory=memory is not None)
            out[name] = NodeUsage(cpu, memory, at)
        return out


class AdaptorSource:
    """Volcano's `prometheus_adaptor` type, through the API server."""

    def __init__(self, api: RawGet) -> None:
        self.api = api

    def _metric(self, metric: str) -> dict[str, tuple[float, float]]:
        try:
            body = self.api.request("GET", ADAPTOR_PATH.format(metric=metric))
        except ApiError as exc:
            raise MetricsError(f"custom.metrics.k8s.io {metric}: {exc}") from exc
        out: dict[str, tuple[float, float]] = {}
        for item in body.get("items") or []:
            name = (item.get("describedObject") or {}).get("name")
            try:
                value = parse_nanos(item.get("value"), metric) / 1e9 * 100
            except ValueError:
                continue
            if isinstance(name, str):
                out[name] = (value, timestamp(item.get("timestamp")))
        return out

    def read(self, nodes: Allocatable) -> dict[str, NodeUsage]:
        cpu = self._metric("node_cpu_usage_avg")
        memory = self._metric("node_memory_usage_avg")
        out: dict[str, NodeUsage] = {}
        for name in nodes:
            c, m = cpu.get(name), memory.get(name)
            if c is None and m is None:
                continue
            at = min(x[1] for x in (c, m) if x is not None)
            out[name] = NodeUsage(c[0] if c else None, m[0] if m else None, at)
        return out


class MetricsServerSource:
    """koordqueue's `metrics_server` type: NodeMetrics over allocatable."""

    def __init__(self, api: RawGet) -> None:
        self.api = api

    def read(self, nodes: Allocatable) -> dict[str, NodeUsage]:
        try:
            body = self.api.request("GET", METRICS_SERVER_PATH)
        except ApiError as exc:
            raise MetricsError(f"metrics.k8s.io nodes: {exc}") from exc
        out: dict[str, NodeUsage] = {}
        for item in body.get("items") or []:
            name = (item.get("metadata") or {}).get("name")
            if not isinstance(name, str) or name not in nodes:
                continue
            cpu_alloc, mem_alloc = nodes[name]
            usage = item.get("usage") or {}
            try:
                cpu = parse_nanos(usage.get("cpu", "0"), "cpu")
                memory = parse_nanos(usage.get("memory", "0"), "memory")
            except ValueError:
                continue
            out[name] = NodeUsage(
                cpu / cpu_alloc * 100 if cpu_alloc else None,
                memory / mem_alloc * 100 if mem_alloc else None,
                timestamp(item.get("timestamp")))
        return out


def make_source(config: MetricsConfig, api: RawGet) -> MetricsSource:
    if config.type == ln.METRICS_PROMETHEUS_ADAPTOR:
        return AdaptorSource(api)
    if config.type == ln.METRICS_SERVER:
        return MetricsServerSource(api)
    return PrometheusSource(config)


def node_allocatable(nodes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """(cpu, memory) allocatable of raw Node objects, in nano-units (0 where unreadable)."""
    out: dict[str, tuple[int, int]] = {}
    for raw in nodes:
        name = (raw.get("metadata") or {}).get("name")
        status = raw.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        try:
            cpu = parse_nanos(alloc.get("cpu", "0"), "cpu")
            memory = parse_nanos(alloc.get("memory", "0"), "memory")
        except ValueError:
            cpu = memory = 0
        if isinstance(name, str):
            out[name] = (cpu, memory)
    return out


class NodeMetricsPoller:
    """Pulls readings every interval on its own thread and hands each pull to `publish`."""

    def __init__(self, config: MetricsConfig, source: MetricsSource,
                 nodes: Callable[[], Allocatable],
                 publish: Callable[[Mapping[str, NodeUsage]], None]) -> None:
        self.config = config
        self.source = source
        self.nodes = nodes
        self.publish = publish
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pull(self) -> bool:
        """One pull; False (logged, nothing published) when the source failed."""
        try:
            readings = self.source.read(self.nodes())
        except MetricsError as exc:
            self.errors += 1
            log.warning("node metrics pull failed; keeping the last readings",
                        type=self.config.type, error=str(exc))
            return False
        self.publish(readings)
        return True

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                self.pull()
                self._stop.wait(self.config.interval)

        self._thread = threading.Thread(target=loop, name="kq-node-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
