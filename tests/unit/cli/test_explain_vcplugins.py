"""`koordqueue explain pod/NAME` names nodegroup, tdm and resourcequota and why they refuse
(issue 34 part 5): the per-node reasons and the verdict come from the scheduler's own cache
and a dry session over API-shaped objects, as in test_explain_pod.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from koordqueue.kube.scheduler.cache import CachedKind
from koordqueue.kube.scheduler.explain_pod import PodVerdict, explain_pod
from koordqueue.scheduler import parse_config
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.plugins.sla import SlaPlugin
from koordqueue.scheduler.plugins.tdm import TdmPlugin
from tests.unit.cli.test_explain_pod import NS, cache_of, node, pod, pod_group, queue


def _conf(plugin: str, arguments: str = "") -> Any:
    return parse_config(f"""
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: {plugin}
{arguments}""")


def reasons(ex: Any) -> dict[str, tuple[str, ...]]:
    return {n.node: n.reasons for n in ex.nodes}


def test_nodegroup_refusals_name_the_plugin() -> None:
    """A queue requiring group "gpu": the "cpu" node and the unlabelled one are refused."""
    q = queue("train")
    q["spec"]["affinity"] = {"nodeGroupAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": ["gpu"]}}
    target = pod("p", cpu="6", annotations={"scheduling.volcano.sh/queue-name": "train"})
    nodes = [node("a", "4", labels={vn.NODE_GROUP_NAME_LABEL: "gpu"}),
             node("b", "8", labels={vn.NODE_GROUP_NAME_LABEL: "cpu"}), node("c", "8")]
    cache = cache_of(nodes, [target], queues=[queue(), q])
    ex = explain_pod(target, cache, _conf(vn.NODEGROUP))
    assert ex.verdict is PodVerdict.UNSCHEDULABLE
    assert reasons(ex)["b"] == (vn.ERR_NODE_GROUP_UNSATISFIED,)
    assert reasons(ex)["c"] == (vn.ERR_NODE_GROUP_LABEL_NOT_FOUND,)


def test_tdm_window_closed_names_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """A revocable pod and a revocable node whose window ("0:00-0:01") is closed at noon."""
    monkeypatch.setattr(TdmPlugin, "clock", staticmethod(
        lambda: datetime(2026, 1, 5, 12, 0).timestamp()))
    target = pod("p", cpu="1", annotations={vn.REVOCABLE_ZONE: "*"})
    cache = cache_of([node("r", labels={vn.REVOCABLE_ZONE: "rz1"})], [target])
    conf = _conf(vn.TDM, '    arguments:\n      tdm.revocable-zone.rz1: "0:00-0:01"\n')
    ex = explain_pod(target, cache, conf)
    assert reasons(ex)["r"] == ("tdm: current time beyond revocable zone rz1:0:00-0:01",)


def test_resourcequota_refusal_is_the_verdict() -> None:
    group = pod_group("g", 1)
    group["spec"]["minResources"] = {"cpu": "3"}
    group["status"] = {"phase": "Pending"}
    target = pod("p", group="g")
    cache = cache_of([node("n", "8")], [target], groups=[group])
    cache.replace(CachedKind.RESOURCE_QUOTA, [{
        "metadata": {"name": "rq", "namespace": NS},
        "status": {"hard": {"cpu": "2"}, "used": {"cpu": "1"}}}])
    ex = explain_pod(target, cache, _conf(vn.RESOURCEQUOTA))
    assert ex.verdict is PodVerdict.PLUGIN_REFUSED, ex
    expected = vn.RESOURCE_QUOTA_INSUFFICIENT.format(
        requested="cpu=3", used="cpu=1", hard="cpu=2", namespace=NS, name="rq")
    assert (ex.summary, ex.message) == (expected, expected)


def test_sla_not_yet_due_is_a_note_on_a_pending_podgroup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A PodGroup its queue cannot take, with a 1h waiting time, created at 00:00: at 00:30
    explain says when sla lets it in; at 02:00 sla has enqueued it (as in Volcano, that is
    all: the queue's capability still refuses the pod in allocate)."""
    created = datetime(2026, 1, 1, 0, 0, tzinfo=UTC).timestamp()
    group = pod_group("g", 1, queue="small")
    group["metadata"]["annotations"] = {vn.SLA_WAITING_TIME_ANNOTATION: "1h"}
    group["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    group["spec"]["minResources"] = {"cpu": "2"}
    group["status"] = {"phase": "Pending"}
    target = pod("p", "2", group="g")
    cache = cache_of([node("n", "8")], [target], groups=[group],
                     queues=[queue(), queue("small", {"cpu": "1"})])
    conf = parse_config("""
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: sla
- plugins:
  - name: gang
  - name: predicates
  - name: capacity
""")
    monkeypatch.setattr(SlaPlugin, "clock", staticmethod(lambda: created + 1800))
    ex = explain_pod(target, cache, conf)
    assert ex.verdict is PodVerdict.NOT_ENQUEUED
    assert vn.SLA_NOT_DUE.format(when="2026-01-01T01:00:00Z") in ex.notes
    monkeypatch.setattr(SlaPlugin, "clock", staticmethod(lambda: created + 7200))
    assert explain_pod(target, cache, conf).verdict is PodVerdict.QUEUE_REFUSED
