"""Inter-pod affinity, topology spread, preferred node affinity and taint scores in whole
sessions: the per-session counts follow the session's own allocations and evictions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.kube.scheduler.convert import task_info
from koordqueue.scheduler import default_config, run_session
from koordqueue.scheduler.api import NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm
from koordqueue.scheduler.api.selectors import LabelSelector, LabelSelectorRequirement
from koordqueue.scheduler.api.task_info import (
    SCHEDULE_ANYWAY,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TaskStatus,
    TopologySpreadConstraint,
)
from koordqueue.scheduler.framework.session import open_session
from koordqueue.scheduler.interpod import InterPodAffinity, pod_counts
from koordqueue.scheduler.plugins.nodeorder import LevelNormalizer, default_normalize
from tests.unit.scheduler.builders import job, node, running, snapshot, task

HOST = "kubernetes.io/hostname"
ZONE = "zone"
APP = LabelSelector((("app", "web"),))


def host(name: str, zone: str = "z1", **labels: str) -> object:
    return node(name, "8", "16Gi", labels={HOST: name, ZONE: zone, **labels})


def web(name: str, **kwargs: object) -> object:
    return task(name, labels={"app": "web"}, **kwargs)


def one_per_host() -> PodAffinity:
    return PodAffinity(anti_required=(PodAffinityTerm(HOST, APP, frozenset({"default"})),))


def placements(result: object) -> dict[str, str]:
    return {b.name: b.node for b in result.binds}  # type: ignore[attr-defined]


def test_gang_with_anti_affinity_lands_one_pod_per_host() -> None:
    # n1 and n2 are busy: least-allocated alone would stack the gang on n0.
    tasks = [web(f"t{i}", pod_affinity=one_per_host()) for i in range(3)]
    nodes = [host(f"n{i}") for i in range(3)]
    for n in nodes[1:]:
        n.add_task(running(f"busy-{n.name}", n.name, cpu="3"))  # type: ignore[attr-defined]
    result = run_session(snapshot(nodes, [job("j", tasks, min_available=3)]), default_config())
    assert sorted(placements(result).values()) == ["n0", "n1", "n2"]


def test_gang_with_anti_affinity_waits_when_hosts_are_too_few() -> None:
    tasks = [web(f"t{i}", pod_affinity=one_per_host()) for i in range(3)]
    nodes = [host(f"n{i}") for i in range(2)]
    result = run_session(snapshot(nodes, [job("j", tasks, min_available=3)]), default_config())
    assert placements(result) == {}


def test_existing_pod_anti_affinity_repels_a_pod_without_constraints() -> None:
    guard = running("guard", "n0", labels={"app": "db"}, pod_affinity=one_per_host())
    nodes = [host("n0"), host("n1")]
    nodes[0].add_task(guard)  # type: ignore[attr-defined]
    nodes[1].add_task(running("busy", "n1", cpu="3"))  # type: ignore[attr-defined]
    result = run_session(snapshot(nodes, [job("j", [web("p")])]), default_config())
    assert placements(result) == {"p": "n1"}


def test_spread_do_not_schedule_balances_zones() -> None:
    constraint = TopologySpreadConstraint(1, ZONE, selector=APP)
    tasks = [web(f"t{i}", spread=(constraint,)) for i in range(4)]
    nodes = [host("a1", "za"), host("a2", "za"), host("a3", "za"), host("b1", "zb")]
    result = run_session(snapshot(nodes, [job("j", tasks, min_available=4)]), default_config())
    zones = [n[0] for n in placements(result).values()]
    assert sorted(zones) == ["a", "a", "b", "b"]  # least-allocated alone would give 3 + 1


def test_spread_schedule_anyway_outweighs_least_allocated() -> None:
    # n1 is busier (least-allocated prefers n0) but holds no pod the constraint counts.
    nodes = [host("n0"), host("n1")]
    nodes[0].add_task(running("old", "n0", labels={"app": "web"}))  # type: ignore[attr-defined]
    nodes[1].add_task(running("other", "n1", cpu="3"))  # type: ignore[attr-defined]
    soft = TopologySpreadConstraint(1, HOST, SCHEDULE_ANYWAY, APP)
    result = run_session(snapshot(nodes, [job("j", [web("p", spread=(soft,))])]), default_config())
    assert placements(result) == {"p": "n1"}


def test_preferred_node_affinity_picks_the_preferred_node() -> None:
    gold = NodeSelectorTerm((NodeSelectorRequirement("tier", "In", ("gold",)),))
    affinity = NodeAffinity(preferred=(PreferredSchedulingTerm(10, gold),))
    nodes = [host("n0", tier="silver"), host("n1", tier="gold"), host("n2", tier="silver")]
    result = run_session(
        snapshot(nodes, [job("j", [task("p", affinity=affinity)])]), default_config()
    )
    assert placements(result) == {"p": "n1"}


def test_eviction_releases_the_anti_affinity_of_the_victim() -> None:
    guard = running("guard", "n0", labels={"app": "db"}, pod_affinity=one_per_host())
    nodes = [host("n0")]
    jobs = [job("g", [guard]), job("j", [web("p")])]
    session = open_session(snapshot(nodes, jobs), default_config())
    pending = session.jobs["j"].tasks["p"]
    ipa = InterPodAffinity(pod_counts(session))
    blocked = ipa.filter(pending)
    assert blocked is not None and not blocked[0]
    session.evict_task(session.jobs["g"].tasks["guard"])
    after = ipa.filter(pending)
    assert after is None or bool(after[0])


def test_allocation_in_the_session_moves_the_counts() -> None:
    tasks = [web(f"t{i}", pod_affinity=one_per_host()) for i in range(2)]
    nodes = [host("n0"), host("n1")]
    session = open_session(snapshot(nodes, [job("j", tasks, min_available=2)]), default_config())
    ipa = InterPodAffinity(pod_counts(session))
    first, second = session.jobs["j"].tasks["t0"], session.jobs["j"].tasks["t1"]
    session.allocate_task(first, session.nodes["n0"])
    mask = ipa.filter(second)
    assert mask is not None and list(mask) == [False, True]
    session.unallocate_task(first)
    mask = ipa.filter(second)
    assert mask is None or list(mask) == [True, True]


def test_terminating_pods_do_not_count_for_spreading() -> None:
    # n1 is busier, so only the spread filter could send the pod there: it would, if the
    # terminating pod on n0 counted (1 + 1 - 0 > maxSkew 1).
    old = running("old", "n0", labels={"app": "web"})
    old.status = TaskStatus.RELEASING
    nodes = [host("n0"), host("n1")]
    nodes[0].add_task(old)  # type: ignore[attr-defined]
    nodes[1].add_task(running("other", "n1", cpu="3"))  # type: ignore[attr-defined]
    hard = TopologySpreadConstraint(1, HOST, selector=APP)
    result = run_session(snapshot(nodes, [job("j", [web("p", spread=(hard,))])]), default_config())
    assert placements(result) == {"p": "n0"}


def test_kube_pod_parsing_resolves_namespaces_and_defaults() -> None:
    pod = task_info(
        {
            "metadata": {"uid": "u", "name": "p", "namespace": "ns", "labels": {"app": "a"}},
            "spec": {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": "zone"},
                            {"topologyKey": "zone", "namespaceSelector": {}},
                        ]
                    },
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 3,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": "t", "operator": "In", "values": ["x"]}
                                    ]
                                },
                            }
                        ]
                    },
                },
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 2,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchExpressions": [{"key": "v", "operator": "Exists"}]},
                        "matchLabelKeys": ["app", "missing"],
                    }
                ],
            },
        }
    )
    assert pod.pod_affinity is not None
    own, everywhere = pod.pod_affinity.required
    assert own.selector is None and own.namespaces == frozenset({"ns"})
    assert everywhere.namespaces == frozenset() and everywhere.namespace_selector is not None
    assert everywhere.namespace_selector.empty
    (constraint,) = pod.spread
    assert not constraint.hard and constraint.min_domains == 1
    assert constraint.node_affinity_policy == "Honor" and constraint.node_taints_policy == "Ignore"
    assert constraint.selector == LabelSelector(
        (("app", "a"),), (LabelSelectorRequirement("v", "Exists"),)
    )
    assert pod.affinity is not None and pod.affinity.preferred[0].weight == 3
    assert pod.labels == {"app": "a"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=12),
    st.lists(st.booleans(), min_size=12, max_size=12),
    st.booleans(),
)
def test_level_normaliser_agrees_with_default_normalize(
    raw_values: list[int], chosen: list[bool], reverse: bool
) -> None:
    raw = np.array(raw_values, dtype=np.float64)
    if not raw.any():
        return
    candidates = np.array(chosen[: len(raw)], dtype=np.bool_)
    if not candidates.any():
        return
    norm = LevelNormalizer(raw, reverse=reverse, weight=1.0)
    expected = default_normalize(raw, candidates, reverse=reverse)
    eff = np.where(candidates, 0.0, float("-inf"))
    got = norm.static if norm.static is not None else norm(eff)
    if expected is None:
        # A constant over the candidates: the normaliser may say None or any constant.
        assert got is None or len(set(got[candidates].tolist())) == 1
    else:
        assert got is not None
        spread = got[candidates] - expected[candidates]
        assert len(set(spread.tolist())) == 1  # equal up to a constant: same choices
