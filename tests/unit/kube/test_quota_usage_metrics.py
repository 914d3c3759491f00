"""`koordqueue_quota_used`: the per-quota usage split as a gauge (issue 18, item 8)."""

from __future__ import annotations

from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.quota_tree import QuotaTree
from koordqueue.domain.resources import Resources
from koordqueue.kube import metrics


def _value(quota: str, resource: str, part: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(
        "koordqueue_quota_used", {"quota": quota, "resource": resource, "part": part}
    )


def _tree() -> QuotaTree:
    t = QuotaTree()
    t.upsert(QuotaSpec(name="m-org", max=Resources.of(cpu=10, memory="1Gi")))
    t.upsert(QuotaSpec(name="m-leaf", max=Resources.of(cpu=10), parent="m-org"))
    t.admit("g", "m-leaf", Resources.of(cpu="1500m"))
    t.admit("o", "m-leaf", Resources.of(cpu=2), oversold=True)
    t.admit("top", "m-org", Resources.of(cpu=1, memory="512Mi"))
    return t


def test_every_part_is_exported_per_quota_and_resource() -> None:
    exporter = metrics.QuotaUsageExporter()
    exporter.export(_tree().report())
    assert _value("m-leaf", "cpu", "total") == 3.5
    assert _value("m-leaf", "cpu", "self") == 3.5
    assert _value("m-leaf", "cpu", "oversold") == 2
    assert _value("m-leaf", "cpu", "guaranteed") == 1.5
    assert _value("m-org", "cpu", "total") == 4.5
    assert _value("m-org", "cpu", "self") == 1
    assert _value("m-org", "cpu", "children") == 3.5
    assert _value("m-org", "memory", "total") == 512 * 2**20
    exporter.export([])  # quotas gone: their series go too
    assert _value("m-leaf", "cpu", "total") is None


def test_exports_are_throttled_to_the_interval() -> None:
    now = [100.0]
    cadence = metrics.Cadence(interval=5, clock=lambda: now[0])
    assert cadence.due()
    now[0] += 4.9
    assert not cadence.due()
    now[0] += 0.2
    assert cadence.due()
