"""--gate-reservation-timeout (issue 14): a gated pod's reservation older than the timeout is
released with a ReservationExpired event; the pod stays un-gated and pending (Kubernetes
cannot add a scheduling gate back) and holds nothing from then on."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.kube.gates.manager import report_expired
from koordqueue.kube.scheduler.cache import CachedKind
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import ControllerSettings
from koordqueue.scheduler.framework import (
    Arguments,
    PluginOption,
    SchedulerConfig,
    Tier,
    open_session,
    run_actions,
)
from koordqueue.scheduler.gates import (
    GATE_NAME,
    Expiry,
    GateView,
    ReservationClock,
    ReservationLedger,
)
from koordqueue.scheduler.gates.names import (
    MSG_RESERVATION_EXPIRED,
    PLUGIN_NAME,
    REASON_RESERVATION_EXPIRED,
)
from koordqueue.scheduler.gates.plugin import QueueAllocationGatePlugin
from tests.unit.gates.test_adapter_apply import NODE, RecordingApi, pod
from tests.unit.gates.test_plugin import BASE, QUEUE, gated
from tests.unit.scheduler.builders import job, node, snapshot, task

ONE = Resources.of(cpu="1")
CAP = {"q": Resources.of(cpu="1")}


def ledger() -> ReservationLedger:
    book = ReservationLedger(CAP)
    book.rebuild([], [])
    return book


# --- the pure ledger ----------------------------------------------------------------------------
def test_a_reservation_records_when_it_was_made() -> None:
    book = ledger()
    book.admit("q", "a", ONE, at=7.0)
    assert book.since("a") == 7.0


def test_a_reservation_older_than_the_timeout_is_released_and_its_room_returns() -> None:
    book = ledger()
    book.admit("q", "a", ONE, at=0.0)
    assert book.expire(now=1.9, timeout=2.0) == []
    assert book.expire(now=2.0, timeout=2.0) == [Expiry("a", "q", ONE, 2.0)]
    assert not book.holds("a")
    assert book.admit("q", "b", ONE, at=2.0)


def test_a_zero_timeout_never_releases() -> None:
    book = ledger()
    book.admit("q", "a", ONE, at=0.0)
    assert book.expire(now=1e9, timeout=0.0) == []
    assert book.holds("a")


def test_an_allocated_reservation_cannot_expire_and_a_rollback_keeps_its_age() -> None:
    book = ledger()
    book.admit("q", "a", ONE, at=1.0)
    book.on_allocate("q", "a", ONE)
    assert book.expire(now=100.0, timeout=2.0) == []
    book.on_deallocate("q", "a", ONE)
    assert book.since("a") == 1.0
    assert [e.uid for e in book.expire(now=3.0, timeout=2.0)] == ["a"]


def test_a_rebuild_takes_the_times_the_caller_remembers() -> None:
    book = ledger()
    book.rebuild([], [("q", "a", ONE)], {"a": 5.0})
    assert book.since("a") == 5.0


OPS = st.lists(
    st.tuples(st.sampled_from(["add", "admit", "allocate", "deallocate", "drop", "expire"]),
              st.integers(0, 5), st.integers(1, 3), st.floats(0.0, 3.0)),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(OPS, st.floats(0.5, 4.0))
def test_totals_always_equal_the_sum_of_live_reservations(
    ops: list[tuple[str, int, int, float]], timeout: float
) -> None:
    """After any stream of changes at advancing times, what the ledger counts as reserved is
    exactly the sum of its live reservations; an expiry only ever releases reservations at
    least `timeout` old, and leaves none that old behind."""
    book = ReservationLedger({"q": Resources.of(cpu="6")})
    book.rebuild([], [])
    now = 0.0
    requests: dict[str, Resources] = {}
    allocated: set[str] = set()
    for kind, pod_no, cpu, step in ops:
        now += step
        uid = f"p{pod_no}"
        request = requests.setdefault(uid, Resources.of(cpu=str(cpu)))
        if kind == "add":
            book.add("q", uid, request, now)
        elif kind == "admit":
            book.admit("q", uid, request, now)
        elif kind == "allocate" and uid not in allocated:
            book.on_allocate("q", uid, request)
            allocated.add(uid)
        elif kind == "deallocate" and uid in allocated:
            book.on_deallocate("q", uid, request)
            allocated.discard(uid)
        elif kind == "drop":
            book.drop(uid)
        elif kind == "expire":
            before = {u: book.since(u) for u in book.live()}
            gone = book.expire(now, timeout)
            for e in gone:
                assert e.age == now - before[e.uid] >= timeout
            assert all(now - (book.since(u) or 0.0) < timeout for u in book.live())
        live = book.live()
        expected = sum(r.get("cpu", 0) for _q, r in live.values())
        assert book.reserved("q").get("cpu", 0) == expected
        assert all(book.since(u) is not None for u in live)


# --- the clock across sessions ------------------------------------------------------------------
def test_the_clock_stamps_a_reservation_it_first_sees_and_hides_expired_pods() -> None:
    clock = ReservationClock(timeout=2.0)
    view = GateView(frozenset({"c"}), frozenset({"r"}))
    assert clock.effective(view, 10.0) == view
    assert clock.since == {"r": 10.0}
    clock.record([Expiry("r", "q", ONE, 2.0)])
    assert clock.effective(view, 12.0) == GateView(frozenset({"c"}), frozenset())


def test_the_clock_forgets_pods_that_were_placed_or_deleted() -> None:
    clock = ReservationClock(timeout=2.0)
    clock.effective(GateView(frozenset(), frozenset({"r", "s"})), 0.0)
    clock.record([Expiry("r", "q", ONE, 2.0)])
    clock.effective(GateView(), 3.0)
    assert (clock.since, clock.expired) == ({}, set())


def test_without_a_timeout_the_clock_changes_nothing() -> None:
    clock = ReservationClock()
    view = GateView(frozenset(), frozenset({"r"}))
    assert clock.effective(view, 5.0) is view
    assert clock.since == {}


# --- the plugin in a session --------------------------------------------------------------------
def session(jobs: list[Any], view: GateView, clock: ReservationClock,
            now: float) -> QueueAllocationGatePlugin:
    option = PluginOption(PLUGIN_NAME, Arguments({"view": view, "clock": clock, "now": now}))
    cfg = SchedulerConfig(BASE.actions, (*BASE.tiers, Tier((option,))))
    s = open_session(snapshot([node("n", cpu="8", memory="16Gi")], jobs, [QUEUE]), cfg)
    run_actions(s)
    s.close()
    plugin = s.plugins[PLUGIN_NAME]
    assert isinstance(plugin, QueueAllocationGatePlugin)
    return plugin


def test_an_expired_reservation_lets_a_waiting_candidate_pass_in_the_same_session() -> None:
    jobs = [job("r", [task("r", node_selector={"no": "match"})], queue="q"),
            job("c", [gated("c")], queue="q")]
    view = GateView(frozenset({"c"}), frozenset({"r"}))
    clock = ReservationClock(timeout=2.0)
    clock.effective(view, 0.0)
    early = session(jobs, view, clock, now=1.0)
    assert (early.expired, early.released) == ([], [])
    late = session(jobs, view, clock, now=2.5)
    assert [(e.uid, e.age) for e in late.expired] == [("r", 2.5)]
    assert late.released == ["c"]
    assert clock.expired == {"r"} and clock.since == {"c": 2.5}


# --- the Kubernetes edge ------------------------------------------------------------------------
class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str, str]] = []

    def record(self, obj: Any, event_type: str, reason: str, message: str) -> bool:
        self.recorded.append((obj["metadata"]["name"], event_type, reason, message))
        return True


def test_an_expiry_becomes_a_warning_event_on_its_pod() -> None:
    events = Events()
    pods = {"r": pod("r")}
    count = report_expired(events, pods, [Expiry("r", "q", ONE, 2.4), Expiry("gone", "q", ONE,
                                                                               3.0)], 2.0)
    message = MSG_RESERVATION_EXPIRED.format(queue="q", request=ONE, age=2.4, timeout=2.0)
    assert count == 1
    assert events.recorded == [("r", "Warning", REASON_RESERVATION_EXPIRED, message)]
    assert "2s ago" in message and "timeout=2s" in message


def test_the_scheduler_releases_an_old_reservation_with_an_event_and_admits_the_next_pod() -> None:
    api = RecordingApi()
    settings_ = ControllerSettings(feature_gates="SchedulingGatesQueueAdmission=true",
                                   gate_reservation_timeout=2.0)
    sched = Scheduler(api, settings_)  # type: ignore[arg-type]
    t = [100.0]
    sched.reservations.now = lambda: t[0]
    sched.cache.replace(CachedKind.NODE, [NODE])
    sched.cache.replace(CachedKind.QUEUE, [{"metadata": {"name": "default"},
                                            "spec": {"weight": 1, "capability": {"cpu": "1"}}}])
    sched.cache.replace(CachedKind.POD, [
        pod("r", selector={"zone": "nowhere"}, opt_in=True),  # un-gated, reserved, unplaceable
        pod("c", gates=[GATE_NAME], opt_in=True),
    ])
    first = sched.run_once()
    t[0] = 101.5
    second = sched.run_once()
    t[0] = 102.0
    third = sched.run_once()
    sched.drain()
    assert (first.released, second.released, second.expired) == ([], [], [])
    assert [e.uid for e in third.expired] == ["r"] and third.released == ["c"]
    reasons = [b["reason"] for m, p, b in api.calls if m == "POST" and p.endswith("/events")]
    assert reasons.count(REASON_RESERVATION_EXPIRED) == 1


def test_without_the_flag_a_reservation_is_held_forever() -> None:
    api = RecordingApi()
    sched = Scheduler(api, ControllerSettings(  # type: ignore[arg-type]
        feature_gates="SchedulingGatesQueueAdmission=true"))
    sched.reservations.now = lambda: 1e9
    sched.cache.replace(CachedKind.NODE, [NODE])
    sched.cache.replace(CachedKind.QUEUE, [{"metadata": {"name": "default"},
                                            "spec": {"weight": 1, "capability": {"cpu": "1"}}}])
    sched.cache.replace(CachedKind.POD, [pod("r", selector={"zone": "nowhere"}, opt_in=True),
                                         pod("c", gates=[GATE_NAME], opt_in=True)])
    rounds = [sched.run_once() for _ in range(3)]
    assert [(r.released, r.expired) for r in rounds] == [([], [])] * 3
