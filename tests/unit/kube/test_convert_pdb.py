"""convert.pod_disruption_budget: policy/v1 PodDisruptionBudget objects into the scheduler's
model (what the opt-in pdb plugin reads)."""

from __future__ import annotations

from koordqueue.kube.scheduler.convert import pod_disruption_budget
from koordqueue.scheduler.api.selectors import LabelSelector, LabelSelectorRequirement


def test_pdb_reads_namespace_selector_allowed_and_disrupted_pods() -> None:
    pdb = pod_disruption_budget(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "minAvailable": 2,
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [
                        {"key": "tier", "operator": "In", "values": ["front"]}
                    ],
                },
            },
            "status": {
                "disruptionsAllowed": 1,
                "disruptedPods": {"web-0": "2026-01-01T00:00:00Z"},
            },
        }
    )
    assert (pdb.namespace, pdb.name, pdb.disruptions_allowed) == ("shop", "web", 1)
    assert pdb.selector == LabelSelector(
        (("app", "web"),), (LabelSelectorRequirement("tier", "In", ("front",)),)
    )
    assert pdb.disrupted_pods == frozenset({"web-0"})
    assert pdb.charges("shop", "web-1", {"app": "web", "tier": "front"})
    assert not pdb.charges("shop", "web-0", {"app": "web", "tier": "front"})


def test_pdb_without_status_or_selector_allows_nothing_and_covers_nothing() -> None:
    pdb = pod_disruption_budget({"metadata": {"name": "x", "namespace": "ns"}, "spec": {}})
    assert pdb.disruptions_allowed == 0
    assert pdb.selector is None
    assert pdb.disrupted_pods == frozenset()
    assert not pdb.covers("ns", {"app": "web"})
