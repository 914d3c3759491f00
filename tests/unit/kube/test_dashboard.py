"""deploy/monitoring/grafana-dashboard.json: every panel's query names only metrics that the
controller's /metrics exports with samples after a real admission round (issue 35 point 8;
Koord-Queue's dashboard has panels on four metrics nothing exports). The names come from the
dashboard and the exposition text, never from a list kept here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from koordqueue.kube import metrics
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE_UNIT
from koordqueue.kube.controller import Controller, OwnerLoop
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota, unit

MONITORING = Path(__file__).resolve().parents[3] / "deploy" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")


def panel_queries(dashboard: dict[str, Any]) -> dict[str, list[str]]:
    """Panel title -> its PromQL expressions (rows have none)."""
    return {
        panel["title"]: [target["expr"] for target in panel.get("targets", [])]
        for panel in dashboard["panels"]
        if panel["type"] != "row"
    }


def named_metrics(expr: str) -> set[str]:
    return {match.group(1) for match in SELECTOR.finditer(expr)}


def exported_samples(text: str) -> set[str]:
    """Sample names with at least one sample in a /metrics exposition."""
    return {
        sample.name
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def live_after_a_round() -> str:
    """The controller's registry as /metrics serves it, after a real round: one unit
    admitted, one refused by CheckUsage, one without a quota label, one naming no quota."""
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("dash", cpu="1"), "default")
    c = Controller(api, ControllerSettings(), writers=1)
    OwnerLoop(c, 1)  # (not started: it registers the owner's backlog gauge, as at run)
    c.resync()
    for name, quota_name in (("fits", "dash"), ("too-big", "dash"), ("lost", "nowhere")):
        c.on_unit("ADDED", api.create(QUEUE_UNIT, unit(name, quota_name, cpu="1"), "ns"))
    stray = unit("stray", "dash")
    del stray["metadata"]["labels"]
    c.on_unit("ADDED", api.create(QUEUE_UNIT, stray, "ns"))
    c.admission_round()
    c.close()
    return generate_latest(metrics.REGISTRY).decode()


def test_every_panel_queries_a_metric_of_this_job() -> None:
    queries = panel_queries(json.loads(DASHBOARD.read_text()))
    assert queries
    for title, exprs in queries.items():
        assert exprs, f"panel {title!r} has no query"
        for expr in exprs:
            selectors = SELECTOR.findall(expr)
            assert selectors, f"{title!r}: no metric selector in {expr!r}"
            for name, labels in selectors:
                assert 'job="$job"' in labels, f"{title!r}: {name} not filtered by $job"


def test_every_panels_metric_is_exported_by_a_live_controller() -> None:
    """Fails naming the panel and metric when a query names a metric with no samples (e.g.
    a renamed metric, or one only declared)."""
    exported = exported_samples(live_after_a_round())
    missing = {
        (title, name)
        for title, exprs in panel_queries(json.loads(DASHBOARD.read_text())).items()
        for expr in exprs
        for name in named_metrics(expr)
        if name not in exported
    }
    assert missing == set()


def test_a_metric_nothing_exports_is_caught() -> None:
    """The check above can fail: a query on Koord-Queue's never-populated metric does."""
    exported = exported_samples(live_after_a_round())
    assert named_metrics('sum(queueunits_in_backoff_queue{job="$job"})') - exported


def test_the_podmonitor_scrapes_the_pods_metrics_port_as_the_dashboards_job() -> None:
    monitor = yaml.safe_load((MONITORING / "podmonitor.yaml").read_text())
    deployment = next(
        doc for doc in yaml.safe_load_all((MONITORING.parent / "deployment.yaml").read_text())
        if doc and doc["kind"] == "Deployment"
    )
    pod = deployment["spec"]["template"]
    ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    assert monitor["kind"] == "PodMonitor"
    assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} <= ports
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    job = pod["metadata"]["labels"][monitor["spec"]["jobLabel"]]
    dashboard = json.loads(DASHBOARD.read_text())
    job_var = next(v for v in dashboard["templating"]["list"] if v["name"] == "job")
    assert job_var["current"]["value"] == job
