"""Node load for usage and rescheduling: the conf's `metrics` section, the three sources,
and the poller feeding the scheduler cache's snapshots.

A real HTTP server on loopback plays Prometheus (its /api/v1/query answers by the
`instance` label the query names); the API-server sources read canned responses of
custom.metrics.k8s.io and metrics.k8s.io. Checked failing with the feature off: without
`set_node_usage` (the poller publishing nothing) the pod lands on the first node by name,
the hot one.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from koordqueue.kube.api_errors import ApiError
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.kube.scheduler.node_metrics import (
    AdaptorSource,
    MetricsError,
    MetricsServerSource,
    NodeMetricsPoller,
    PrometheusSource,
    node_allocatable,
)
from koordqueue.scheduler import parse_config, run_session
from koordqueue.scheduler.api.node_usage import NodeUsage
from koordqueue.scheduler.framework.config import ConfigError
from koordqueue.scheduler.framework.metrics_config import MetricsConfig
from tests.unit.kube.cache_replay import make_node, make_pod, make_queue
from tests.unit.scheduler.builders import bound_nodes

LOAD = {"a-hot": (93.5, 40.0), "b-cool": (12.0, 30.0)}


class _Prometheus(BaseHTTPRequestHandler):
    fail = False

    def do_GET(self) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)["query"][0]
        found = re.search(r'instance="([^"]+)"', query)
        node = found.group(1) if found else ""
        if type(self).fail:
            self.send_response(503)
            self.end_headers()
            return
        load = LOAD.get(node)
        value = None if load is None else load[0 if "cpu" in query else 1]
        result = [] if value is None else [{"metric": {"instance": node},
                                            "value": [time.time(), str(value)]}]
        body = json.dumps({"status": "success",
                           "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Prometheus.fail = False
    server.shutdown()
    server.server_close()


def test_prometheus_readings_by_node(prometheus: str) -> None:
    source = PrometheusSource(MetricsConfig(address=prometheus), clock=lambda: 1000.0)
    got = source.read({"a-hot": (4, 8), "b-cool": (4, 8), "c-new": (4, 8)})
    assert got == {"a-hot": NodeUsage(93.5, 40.0, 1000.0), "b-cool": NodeUsage(12.0, 30.0, 1000.0),
                   "c-new": NodeUsage(None, None, 1000.0)}


def test_a_failed_pull_keeps_the_last_readings(prometheus: str) -> None:
    published: list[dict[str, NodeUsage]] = []
    poller = NodeMetricsPoller(MetricsConfig(address=prometheus), PrometheusSource(
        MetricsConfig(address=prometheus)), lambda: {"a-hot": (4, 8)},
        lambda readings: published.append(dict(readings)))
    assert poller.pull() and published[-1]["a-hot"].cpu == 93.5
    _Prometheus.fail = True
    assert not poller.pull() and poller.errors == 1 and len(published) == 1
    with pytest.raises(MetricsError, match=r"prometheus http://127\.0\.0\.1:.*503"):
        PrometheusSource(MetricsConfig(address=prometheus)).read({"a-hot": (4, 8)})


CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: usage
    arguments:
      usage.weight: 5
      thresholds: {cpu: 80, mem: 80}
metrics:
  type: prometheus
  address: %s
  interval: 30s
"""


def _cache() -> SchedulerCache:
    cache = SchedulerCache()
    cache.replace(CachedKind.NODE,
                  [make_node("a-hot", 1, True, 4), make_node("b-cool", 1, True, 4)])
    cache.replace(CachedKind.QUEUE, [make_queue("default", 1, 1)])
    cache.replace(CachedKind.POD, [make_pod("p1", 1, True, None, None, "Pending", 1, "default")])
    return cache


def test_the_poller_feeds_the_sessions_and_the_hot_node_is_refused(prometheus: str) -> None:
    conf = parse_config(CONF % prometheus)
    assert conf.metrics == MetricsConfig("prometheus", prometheus, 30.0, False)
    cache = _cache()
    poller = NodeMetricsPoller(conf.metrics, PrometheusSource(conf.metrics),
                               lambda: node_allocatable(cache.nodes()), cache.set_node_usage)
    assert poller.pull()
    built = cache.build()
    assert set(built.snapshot.node_usage) == {"a-hot", "b-cool"}
    assert cache.rebuild().snapshot.node_usage == built.snapshot.node_usage
    assert list(bound_nodes(run_session(built.snapshot, conf)).values()) == ["b-cool"]


def test_without_readings_the_pod_takes_the_first_node() -> None:
    """The same cluster with nothing pulled: the usage plugin has no reason to refuse."""
    cache = _cache()
    conf = parse_config(CONF % "http://127.0.0.1:1")
    assert list(bound_nodes(run_session(cache.build().snapshot, conf)).values()) == ["a-hot"]


class _Api:
    def __init__(self, answers: dict[str, dict[str, Any] | ApiError]) -> None:
        self.answers = answers

    def request(self, method: str, path: str) -> dict[str, Any]:
        answer = self.answers[path]
        if isinstance(answer, ApiError):
            raise answer
        return answer


def test_prometheus_adaptor_reads_the_custom_metrics_api() -> None:
    base = "/apis/custom.metrics.k8s.io/v1beta1/nodes/*/"
    item = {"describedObject": {"kind": "Node", "name": "n1"},
            "timestamp": "2026-12-05T12:00:00Z"}
    api = _Api({base + "node_cpu_usage_avg": {"items": [{**item, "value": "850m"}]},
                base + "node_memory_usage_avg": {"items": [{**item, "value": "250m"}]}})
    got = AdaptorSource(api).read({"n1": (0, 0), "n2": (0, 0)})
    assert list(got) == ["n1"]
    assert got["n1"].cpu == pytest.approx(85.0) and got["n1"].memory == pytest.approx(25.0)
    assert got["n1"].at == 1796472000.0


def test_metrics_server_divides_by_allocatable() -> None:
    api = _Api({"/apis/metrics.k8s.io/v1beta1/nodes": {"items": [
        {"metadata": {"name": "n1"}, "timestamp": "2026-12-05T12:00:00Z",
         "usage": {"cpu": "3", "memory": "2Gi"}},
        {"metadata": {"name": "gone"}, "usage": {"cpu": "1"}}]}})
    alloc = node_allocatable([{"metadata": {"name": "n1"},
                               "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}])
    got = MetricsServerSource(api).read(alloc)
    assert got == {"n1": NodeUsage(75.0, 25.0, 1796472000.0)}
    path = "/apis/metrics.k8s.io/v1beta1/nodes"
    failing = _Api({path: ApiError(404, "NotFound", "not served", "GET", path)})
    with pytest.raises(MetricsError, match=r"metrics\.k8s\.io nodes"):
        MetricsServerSource(failing).read(alloc)


@pytest.mark.parametrize(("section", "message"), [
    ("type: elasticsearch\n  address: http://es:9200", "'elasticsearch' is not supported"),
    ("type: graphite", "unknown type 'graphite'"),
    ("type: prometheus", "metrics.address: metrics address is empty"),
    ("address: http://p:9090\n  interval: soon", "metrics.interval: time: invalid duration"),
    ("address: http://p:9090\n  interval: 0s", "metrics.interval: must be > 0"),
])
def test_a_bad_metrics_section_is_refused_naming_the_field(section: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config(f'actions: "allocate"\nmetrics:\n  {section}\n', "conf")


def test_the_adaptor_and_metrics_server_need_no_address() -> None:
    for kind in ("prometheus_adaptor", "metrics_server"):
        conf = parse_config(f'actions: "allocate"\nmetrics:\n  type: {kind}\n')
        assert conf.metrics == MetricsConfig(kind, "", 30.0, False)
