"""bench/soak_checker.py: each invariant is caught, and what the soak legitimately does is not.

Made-up watch and audit events, in the shapes the API server sends them. Every "is caught"
test fails with its rule switched off (checked by removing each `_violate` call in turn).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.soak_checker import Checker, per_interval, pooled_rss_slope, role_segments, rss_slope
from koordqueue.domain.names import QUEUE_USED_ANNOTATION, QUOTA_NAME_LABEL, QUOTA_PARENT_LABEL

T0 = 1_800_000_000.0


def quota(name: str, cpu: str, parent: str = "") -> dict[str, Any]:
    labels = {QUOTA_PARENT_LABEL: parent} if parent else {}
    return {"metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"max": {"cpu": cpu}}}


def unit(uid: str, quota_name: str, cpu: str, phase: str = "", job: str | None = None
         ) -> dict[str, Any]:
    return {
        "metadata": {"name": f"u-{uid}", "namespace": "ns", "uid": uid,
                     "labels": {QUOTA_NAME_LABEL: quota_name}},
        "spec": {"consumerRef": {"kind": "Job", "name": job or f"j-{uid}"},
                 "resource": {"cpu": cpu}},
        "status": {"phase": phase} if phase else {},
    }


def queue(name: str, used: dict[str, int]) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {QUEUE_USED_ANNOTATION: json.dumps(used)}}}


def stamp(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def audit(t: float, verb: str, resource: str, agent: str, code: int = 200, name: str = "x",
          holder: str | None = None, subresource: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "stage": "ResponseComplete", "verb": verb, "userAgent": agent,
        "objectRef": {"resource": resource, "name": name, "namespace": "ns",
                      **({"subresource": subresource} if subresource else {})},
        "responseStatus": {"code": code},
        "requestReceivedTimestamp": stamp(t), "stageTimestamp": stamp(t + 0.001),
    }
    if holder is not None:
        event["responseObject"] = {"spec": {"holderIdentity": holder}}
    return event


def kinds(checker: Checker) -> list[str]:
    return [v.kind for v in checker.violations]


# --- admitted twice ------------------------------------------------------------------------
def test_a_unit_admitted_again_after_it_finished_is_caught() -> None:
    c = Checker()
    c.on_quota(None, quota("q", "4"), T0)
    for phase in ("Enqueued", "Dequeued", "Succeed", "Dequeued"):
        c.on_unit("MODIFIED", unit("a", "q", "1", phase), T0 + 1)
    assert kinds(c) == ["admitted-twice"]


def test_two_units_of_one_job_admitted_at_once_are_caught() -> None:
    c = Checker()
    c.on_quota(None, quota("q", "4"), T0)
    c.on_unit(None, unit("a", "q", "1", "Dequeued", job="j"), T0)
    c.on_unit(None, unit("b", "q", "1", "Dequeued", job="j"), T0)
    assert kinds(c) == ["admitted-twice"]


def test_a_unit_released_and_admitted_again_is_not_a_double_admission() -> None:
    c = Checker()
    c.on_quota(None, quota("q", "4"), T0)
    for phase in ("Dequeued", "Enqueued", "Dequeued", "Running"):
        c.on_unit("MODIFIED", unit("a", "q", "1", phase), T0)
    assert c.violations == [] and len(c.admissions) == 2


# --- quota over max ------------------------------------------------------------------------
def test_an_admission_over_a_parents_max_is_caught() -> None:
    c = Checker()
    c.on_quota(None, quota("p", "2"), T0 - 100)
    c.on_quota(None, quota("a", "2", parent="p"), T0 - 100)
    c.on_quota(None, quota("b", "2", parent="p"), T0 - 100)
    c.on_unit(None, unit("1", "a", "2", "Dequeued"), T0)
    c.on_unit(None, unit("2", "b", "1", "Dequeued"), T0)  # b has room, p does not
    assert kinds(c) == ["quota-over-max"]
    assert "p/cpu: 3 > 2" in c.violations[0].detail


def test_oversell_multiplies_the_max() -> None:
    c = Checker(oversell=1.5)
    c.on_quota(None, quota("q", "2"), T0 - 100)
    c.on_unit(None, unit("1", "q", "3", "Dequeued"), T0)
    assert c.violations == []


def test_an_admission_under_a_max_lowered_within_the_window_is_not_caught() -> None:
    c = Checker(quota_window=15)
    c.on_quota(None, quota("q", "4"), T0 - 100)
    c.on_quota("MODIFIED", quota("q", "1"), T0 - 2)  # the controller may not have seen it
    c.on_unit(None, unit("1", "q", "3", "Dequeued"), T0)
    assert c.violations == []
    c.on_unit(None, unit("2", "q", "1", "Dequeued"), T0 + 60)  # long after: over the new max
    assert kinds(c) == ["quota-over-max"]


def test_a_max_lowered_below_what_is_admitted_is_not_itself_a_violation() -> None:
    c = Checker()
    c.on_quota(None, quota("q", "4"), T0 - 100)
    c.on_unit(None, unit("1", "q", "3", "Dequeued"), T0 - 50)
    c.on_quota("MODIFIED", quota("q", "1"), T0)
    c.tick(T0 + 1)
    assert c.violations == []


def test_a_reparented_quota_counts_under_its_new_parent_after_the_window() -> None:
    c = Checker(quota_window=5)
    for q in (quota("p1", "10"), quota("p2", "2"), quota("a", "10", parent="p1")):
        c.on_quota(None, q, T0 - 100)
    c.on_unit(None, unit("1", "a", "2", "Dequeued"), T0 - 90)
    c.on_quota("MODIFIED", quota("a", "10", parent="p2"), T0 - 50)
    c.on_unit(None, unit("2", "a", "1", "Dequeued"), T0)  # p2 now holds 3 > 2
    assert kinds(c) == ["quota-over-max"]


def test_an_admission_into_a_missing_quota_is_caught() -> None:
    c = Checker()
    c.on_unit(None, unit("1", "nowhere", "1", "Dequeued"), T0)
    assert kinds(c) == ["quota-over-max"] and "missing" in c.violations[0].detail


# --- usage annotations ----------------------------------------------------------------------
def test_a_usage_annotation_that_disagrees_with_the_recount_is_caught_once_settled() -> None:
    c = Checker(settle=20)
    c.on_quota(None, quota("q", "8"), T0)
    c.on_unit(None, unit("1", "q", "1500m", "Dequeued"), T0)
    c.on_queue(None, queue("q", {"cpu": 1}), T0)  # the recount rounds 1.5 up to 2
    for t in range(0, 19):
        c.tick(T0 + t)
    assert c.violations == []  # not settled yet: the controller rewrites every 5 s
    c.tick(T0 + 21)
    c.tick(T0 + 22)
    assert kinds(c) == ["usage-annotation"]  # once


def test_a_matching_annotation_and_one_not_yet_settled_after_a_fault_pass() -> None:
    c = Checker(settle=20)
    c.on_quota(None, quota("q", "8"), T0)
    c.on_unit(None, unit("1", "q", "1500m", "Dequeued"), T0)
    c.on_queue(None, queue("q", {"cpu": 2, "memory": 0}), T0)
    c.tick(T0)
    c.tick(T0 + 30)
    c.on_queue(None, queue("q", {}), T0 + 31)
    c.fault(T0 + 31)
    c.tick(T0 + 40)
    assert c.violations == []


def test_a_fault_longer_than_the_settle_time_is_not_quiet_until_it_ends() -> None:
    """The 30-minute run: an etcd restart took 21 s; counted from its start, the usage rule
    fired inside it. Fails with the fault's duration ignored (checked)."""
    c = Checker(settle=20)
    c.on_quota(None, quota("q", "8"), T0)
    c.on_unit(None, unit("1", "q", "1", "Dequeued"), T0)
    c.on_queue(None, queue("q", {"cpu": 7}), T0)
    c.fault(T0, began=True)
    c.tick(T0)
    c.tick(T0 + 25)  # still inside the fault
    c.fault(T0 + 30, began=False)
    c.tick(T0 + 45)
    assert c.violations == []
    assert c.quiet_since(T0 + 45) == T0 + 30
    c.tick(T0 + 51)
    assert kinds(c) == ["usage-annotation"]


def test_a_queue_made_again_gets_the_settle_time_for_its_first_annotations() -> None:
    """Its quota deleted and created again, the Queue comes back bare and is annotated at the
    controller's next sync; the recount had not changed for long. Fails without the reset
    (checked: caught at once)."""
    c = Checker(settle=20)
    c.on_quota(None, quota("q", "8"), T0)
    c.on_unit(None, unit("1", "q", "1", "Dequeued"), T0)
    c.on_queue(None, queue("q", {"cpu": 1}), T0)
    c.tick(T0)
    c.on_queue("DELETED", queue("q", {}), T0 + 100)
    c.on_queue("ADDED", queue("q", {}), T0 + 100)
    c.tick(T0 + 101)
    assert c.violations == []
    c.tick(T0 + 125)  # still bare after the settle time: caught
    assert kinds(c) == ["usage-annotation"]


# --- fits but not admitted ------------------------------------------------------------------
def test_a_waiting_unit_that_fits_is_caught_after_the_bound_past_the_last_fault() -> None:
    c = Checker(bound=30)
    c.on_quota(None, quota("q", "4"), T0)
    c.on_unit(None, unit("1", "q", "1", "Enqueued"), T0)
    c.fault(T0 + 20)
    c.tick(T0)
    c.tick(T0 + 45)
    assert c.violations == []  # 25 s after the fault
    c.tick(T0 + 51)
    assert kinds(c) == ["fits-not-admitted"]


def test_a_waiting_unit_that_does_not_fit_is_not_caught() -> None:
    c = Checker(bound=30)
    c.on_quota(None, quota("q", "2"), T0)
    c.on_unit(None, unit("1", "q", "2", "Dequeued"), T0)
    c.on_unit(None, unit("2", "q", "1", "Enqueued"), T0)
    c.tick(T0)
    c.tick(T0 + 100)
    assert c.violations == []


# --- pods -----------------------------------------------------------------------------------
def pod(uid: str, node: str = "", cpu: str = "1", phase: str = "Pending") -> dict[str, Any]:
    return {"metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid},
            "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": phase}}


def node(name: str, cpu: str, pods: str = "110") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "pods": pods}}}


def test_a_pod_bound_to_a_full_node_is_caught_and_a_finished_one_frees_room() -> None:
    c = Checker()
    c.on_node(None, node("n", "2"), T0)
    c.on_pod(None, pod("a", "n", "2", "Running"), T0)
    c.on_pod(None, pod("b"), T0)
    c.on_pod("MODIFIED", pod("a", "n", "2", "Succeeded"), T0 + 1)
    c.on_pod("MODIFIED", pod("b", "n", "2"), T0 + 2)
    assert c.violations == []
    c.on_pod(None, pod("c"), T0 + 3)
    c.on_pod("MODIFIED", pod("c", "n", "1"), T0 + 4)
    assert kinds(c) == ["pod-over-node"]


def test_the_pods_limit_counts() -> None:
    c = Checker()
    c.on_node(None, node("n", "100", pods="1"), T0)
    c.on_pod(None, pod("a", "n", "1", "Running"), T0)
    c.on_pod("MODIFIED", pod("b", "n", "1"), T0)
    assert kinds(c) == ["pod-over-node"]


def test_a_pod_moved_between_nodes_or_bound_twice_in_the_audit_is_caught() -> None:
    c = Checker()
    c.on_node(None, node("n", "8"), T0)
    c.on_node(None, node("m", "8"), T0)
    c.on_pod(None, pod("a", "n"), T0)
    c.on_pod("MODIFIED", pod("a", "m"), T0)
    agent = "koordqueue/0.1.0 (h_1)"
    for _ in range(2):
        c.on_audit(audit(T0, "create", "pods", agent, 201, "p-b", subresource="binding"))
    c.on_audit(audit(T0, "create", "pods", agent, 409, "p-c", subresource="binding"))
    c.on_audit(audit(T0, "create", "pods", agent, 201, "p-c", subresource="binding"))
    assert kinds(c) == ["pod-bound-twice", "pod-bound-twice"]


# --- writes only from the leader -------------------------------------------------------------
def test_a_write_from_a_replica_that_does_not_hold_its_lease_is_caught() -> None:
    c = Checker()
    a, b = "koordqueue/0.1.0 (host_1)", "koordqueue/0.1.0 (host_2)"
    c.register("host_1", "koord-queue")
    c.register("host_2", "koord-queue")
    c.on_audit(audit(T0, "update", "leases", a, 200, "koord-queue", holder="host_1"))
    c.on_audit(audit(T0 + 1, "patch", "queueunits", a))  # the leader: fine
    c.on_audit(audit(T0 + 2, "patch", "queueunits", b, 409))  # a standby: caught
    c.on_audit(audit(T0 + 3, "create", "namespaces", b, 409))  # start-up, by design
    c.on_audit(audit(T0 + 4, "update", "leases", b, 409, "koord-queue"))  # trying: fine
    c.on_audit(audit(T0 + 10, "update", "leases", b, 200, "koord-queue", holder="host_2"))
    c.on_audit(audit(T0 + 11, "create", "events", a, 201))  # the deposed leader: caught
    c.on_audit(audit(T0 + 12, "create", "events", "kubectl/v1.37.2", 201))  # not a replica
    assert kinds(c) == ["write-not-leader", "write-not-leader"]
    assert "host_2 patch queueunits" in c.violations[0].detail
    assert c.writes_checked == 3
    [takeover] = c.takeovers
    assert (takeover.previous, takeover.holder) == ("host_1", "host_2")
    assert abs(takeover.gap - 10) < 0.01


def test_a_release_then_an_acquisition_is_a_takeover_with_its_own_gap() -> None:
    c = Checker()
    agent = "koordqueue/0.1.0 ({})"
    for ident in ("h_1", "h_2"):
        c.register(ident, "koord-queue-scheduler")
    c.on_audit(audit(T0, "create", "leases", agent.format("h_1"), 201, "koord-queue-scheduler",
                     holder="h_1"))
    c.on_audit(audit(T0 + 5, "update", "leases", agent.format("h_1"), 200,
                     "koord-queue-scheduler", holder=""))
    c.on_audit(audit(T0 + 5.5, "update", "leases", agent.format("h_2"), 200,
                     "koord-queue-scheduler", holder="h_2"))
    assert [(t.previous, t.holder, round(t.gap, 2)) for t in c.takeovers] == [("", "h_2", 0.5)]
    assert c.holder("koord-queue-scheduler", T0 + 5.2) == ""


# --- memory and rates -----------------------------------------------------------------------
def test_rss_slope_judges_the_second_half_of_a_life() -> None:
    warm_then_flat = [(t, 100_000_000 + (min(t, 300) * 100_000)) for t in range(0, 1200, 60)]
    assert abs(rss_slope(warm_then_flat) or 0) < 0.01
    leaking = [(t, 100_000_000 + t * 10_000) for t in range(0, 1200, 60)]  # 10 kB/s
    assert abs((rss_slope(leaking) or 0) - 36.0) < 0.01
    assert rss_slope(leaking[:5]) is None
    c = Checker(rss_limit_mb_per_hour=20)
    c.check_rss("controller-1", leaking, T0)
    c.check_rss("controller-2", warm_then_flat, T0)
    assert kinds(c) == ["rss-growth"]


def lives(
    leak_per_s: float, count: int = 6, life: int = 240
) -> list[tuple[float, list[tuple[float, int]]]]:
    """`count` processes of `life` seconds back to back: 60 s of start-up growth (20 MB),
    then `leak_per_s` bytes a second; each restart starts again from 100 MB."""
    out = []
    for i in range(count):
        start = float(i * life)
        out.append((start, [(start + a, int(100e6 + min(a, 60) * 20e6 / 60 + max(a - 60, 0)
                                              * leak_per_s)) for a in range(0, life, 10)]))
    return out


def test_pooled_rss_slope_judges_many_short_lives() -> None:
    """Four-minute lives (what the soak's faults leave), six of them: the pooled slope past
    the warm-up finds a 10 kB/s leak (36 MB/h) and no growth in flat ones; without the
    warm-up, start-up growth alone reads as a leak."""
    leaking, flat = lives(10_000), lives(0)
    slope, covered = pooled_rss_slope(leaking, warmup=60)
    assert slope is not None and abs(slope - 36.0) < 0.01
    assert covered == 6 * 170
    assert pooled_rss_slope(flat, warmup=60)[0] == 0
    start_up_only, _ = pooled_rss_slope(flat, warmup=0)
    assert start_up_only is not None and start_up_only > 36  # why the warm-up is cut
    assert pooled_rss_slope(lives(0, count=1, life=70), warmup=60) == (None, 0.0)


def test_a_pooled_slope_is_judged_once_it_covers_enough() -> None:
    c = Checker(rss_limit_mb_per_hour=20)
    slope, covered = pooled_rss_slope(lives(10_000), warmup=60)
    assert not c.check_pooled_rss("controller-0", slope, covered, covered + 1, T0)
    assert c.check_pooled_rss("controller-0", slope, covered, covered, T0)
    flat, flat_cover = pooled_rss_slope(lives(0), warmup=60)
    assert c.check_pooled_rss("controller-1", flat, flat_cover, flat_cover, T0)
    assert kinds(c) == ["rss-growth"]


def test_a_takeover_is_a_start_up_of_its_own() -> None:
    """A standby flat at 100 MB takes the Lease at 300 s and steps to 108 MB within a minute,
    then stays flat: split at the takeover, no growth; one line through the life past its
    warm-up reads the step as 44 MB/h."""
    agent = "koordqueue/0.1.0 ({})"
    c = Checker()
    c.register("h_7", "koord-queue")
    c.on_audit(audit(T0 + 300, "update", "leases", agent.format("h_7"), 200, "koord-queue",
                     holder="h_7"))
    assert c.led_from("h_7") == T0 + 300.001 and c.led_from("h_8") is None
    samples = [(T0 + t, int(100e6 + (8e6 * min(max(t - 300, 0), 40) / 40)))
               for t in range(0, 900, 10)]
    split = role_segments(T0, samples, c.led_from("h_7"))
    assert [len(seg) for _, seg in split] == [31, 59]  # (the Lease write lands at 300.001 s)
    assert abs(pooled_rss_slope(split, warmup=60)[0] or 0) < 0.01
    whole = pooled_rss_slope([(T0, samples)], warmup=60)[0]
    assert whole is not None and whole > 40
    assert role_segments(T0, samples, None) == [(T0, samples)]


def test_per_interval_rates() -> None:
    assert per_interval([T0 + 1, T0 + 2, T0 + 65], T0, 60) == [2 / 60, 1 / 60]


def test_a_leaders_warm_up_is_left_out_of_its_segment() -> None:
    """A standby flat at 100 MB takes the Lease at 300 s and grows 12 MB over the next ten
    minutes, slower and slower (the 40-minute leader of the no-fault soak), then stays flat:
    with the leader's warm-up left out, no growth; with one minute left out, the warm-up's
    tail reads as growth."""
    led = T0 + 300

    def rss(t: float) -> int:
        into = max(t - 300, 0.0)
        return int(100e6 + 12e6 * (1 - 0.5 ** (into / 120)) if into < 600 else 100e6 + 12e6)

    samples = [(T0 + t, rss(t)) for t in range(0, 1800, 10)]
    short = pooled_rss_slope(role_segments(T0, samples, led), warmup=60)[0]
    assert short is not None and short > 5
    long_ = pooled_rss_slope(role_segments(T0, samples, led, leader_warmup=600), warmup=60)[0]
    assert long_ is not None and abs(long_) < 0.01
    standby, leader = role_segments(T0, samples, led, leader_warmup=600)
    assert leader[0] == led and leader[1][0][0] >= led + 600
    assert len(standby[1]) == 30
