"""The inter-pod counts' cheaper paths decide exactly like the plain computations: domain
sums and the nodes with a count, kept per event, equal a fresh `bincount` / `flatnonzero`,
and the host-spreading score worked out on the nodes holding matching pods equals the
general score."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.scheduler import ClusterSnapshot, default_config
from koordqueue.scheduler.api import TaskInfo
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.api.task_info import (
    SCHEDULE_ANYWAY,
    PodAffinity,
    PodAffinityTerm,
    TopologySpreadConstraint,
)
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.interpod import (
    HOSTNAME_KEY,
    InterPodAffinity,
    PodTopologySpread,
    pod_counts,
)
from koordqueue.scheduler.plugins.predicates import spread_inclusion

from .builders import job, node, running, snapshot, task

ZONE = "zone"
SPREAD = LabelSelector((("app", "s"),))


def _cluster(placement: list[int], hosts_labelled: list[bool]) -> tuple[ClusterSnapshot, TaskInfo]:
    nodes = [
        node(
            f"n{i}",
            cpu="64",
            labels={ZONE: f"z{i % 3}", **({HOSTNAME_KEY: f"n{i}"} if labelled else {})},
        )
        for i, labelled in enumerate(hosts_labelled)
    ]
    pods = [
        running(f"p{k}", f"n{at}", cpu="1", labels={"app": "s"}) for k, at in enumerate(placement)
    ]
    jobs = [job(f"j{k}", [p]) for k, p in enumerate(pods)]
    return snapshot(nodes, jobs), task("x", labels={"app": "s"})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.integers(2, 12),
    data=st.data(),
    skews=st.lists(st.integers(1, 4), min_size=1, max_size=2),
)
def test_host_spreading_score_equals_the_general_score(
    size: int, data: st.DataObject, skews: list[int]
) -> None:
    placement = data.draw(st.lists(st.integers(0, size - 1), max_size=3 * size))
    labelled = data.draw(st.lists(st.booleans(), min_size=size, max_size=size))
    candidates = np.array(data.draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    snap, incoming = _cluster(placement, labelled)
    job_x = job("jx", [incoming])
    session = open_session(snapshot(snap.nodes, [*snap.jobs, job_x]), default_config())
    pts = PodTopologySpread(pod_counts(session), spread_inclusion(session.node_list))
    soft = [TopologySpreadConstraint(k, HOSTNAME_KEY, SCHEDULE_ANYWAY, SPREAD) for k in skews]
    x = session.jobs["jx"].tasks["x"]
    all_keys = pts._all_keys(soft)
    fast = pts._score_hosts(x, soft, candidates, all_keys)
    general = pts._score_general(x, soft, candidates, all_keys)
    if general is None:
        assert fast is None
    else:
        assert fast is not None and np.array_equal(fast, general)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    placement=st.lists(st.integers(0, 5), max_size=12),
    moves=st.lists(st.tuples(st.integers(0, 5), st.sampled_from([1, -1])), max_size=20),
)
def test_domain_sums_follow_every_event(placement: list[int], moves: list[tuple[int, int]]) -> None:
    snap, _incoming = _cluster(placement, [True] * 6)
    session = open_session(snap, default_config())
    counts = pod_counts(session)
    vec = counts.spread_filter("default", SPREAD).vec
    d = counts.topology(ZONE)
    sums = vec.sums(ZONE, d)  # registered now: kept in step from here on
    nonzero = vec.nonzero()  # likewise
    for at, delta in moves:
        vec.add(at, delta)
    fresh = np.bincount(d.ext, weights=vec.counts, minlength=d.count + 1)
    assert np.array_equal(sums, fresh.astype(np.intp))
    assert nonzero == set(np.flatnonzero(vec.counts).tolist())
    assert vec.total == int(vec.counts.sum())


def test_repeated_queries_add_no_filters() -> None:
    # Filters are found by the identity of the job-shared term objects; a query that wraps
    # a single term in a fresh tuple must still find the one made before.
    term = PodAffinityTerm(HOSTNAME_KEY, SPREAD, frozenset({"default"}))
    affinity = PodAffinity(preferred=(term,), anti_required=(term,))
    snap, _incoming = _cluster([0, 1], [True, True, True])
    pending = task("x", labels={"app": "s"}, pod_affinity=affinity)
    session = open_session(
        snapshot(snap.nodes, [*snap.jobs, job("jx", [pending])]), default_config()
    )
    counts = pod_counts(session)
    ipa = InterPodAffinity(counts)
    x = session.jobs["jx"].tasks["x"]
    first = (ipa.filter(x), ipa.raw_score(x))
    known = len(counts._by_identity)
    for _ in range(5):
        again = (ipa.filter(x), ipa.raw_score(x))
    assert len(counts._by_identity) == known
    assert first[0] is not None and again[0] is not None
    assert np.array_equal(first[0], again[0])
