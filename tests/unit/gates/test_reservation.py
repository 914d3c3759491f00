"""ReservationLedger: the reserved-capacity bookkeeping of SPEC 3.5."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.gates import (
    GATE_NAME,
    GateState,
    ReservationLedger,
    classify_gates,
    gated_resources,
    opted_in,
)

ONE = Resources.of(cpu="1", memory="1Gi")
CAP = {"q": Resources.of(cpu="1", memory="1Gi")}


def ledger() -> ReservationLedger:
    book = ReservationLedger(CAP)
    book.rebuild([], [])
    return book


def test_a_passing_pod_reserves_its_request() -> None:
    book = ledger()
    assert book.admit("q", "a", ONE)
    assert book.reserved("q") == ONE


def test_a_reservation_keeps_the_next_pod_out() -> None:
    book = ledger()
    book.admit("q", "a", ONE)
    assert not book.admit("q", "b", ONE)


def test_the_candidate_is_not_counted_twice() -> None:
    book = ledger()
    book.admit("q", "a", ONE)
    assert book.fits("q", "a", ONE)
    assert book.reserved("q", excluding="a") == Resources.of(cpu="0", memory="0")


def test_allocation_consumes_the_reservation() -> None:
    book = ledger()
    book.admit("q", "a", ONE)
    book.on_allocate("q", "a", ONE)
    assert not book.holds("a")
    assert book.allocated("q") == ONE
    assert book.reserved("q")["cpu"] == 0


def test_rollback_restores_the_reservation() -> None:
    book = ledger()
    book.admit("q", "a", ONE)
    book.on_allocate("q", "a", ONE)
    book.on_deallocate("q", "a", ONE)
    assert book.holds("a")
    assert book.allocated("q")["cpu"] == 0


def test_rollback_of_an_unreserved_pod_reserves_nothing() -> None:
    book = ledger()
    book.on_allocate("q", "x", ONE)
    book.on_deallocate("q", "x", ONE)
    assert not book.holds("x")


def test_rebuild_forgets_the_previous_session() -> None:
    book = ledger()
    book.admit("q", "a", ONE)
    book.rebuild([], [("q", "b", ONE)])
    assert not book.holds("a")
    assert book.holds("b")


def test_an_unlimited_queue_admits_everything() -> None:
    book = ReservationLedger({"q": None})
    assert all(book.admit("q", str(i), ONE) for i in range(10))


def test_resources_the_capability_does_not_list_are_unlimited() -> None:
    book = ReservationLedger({"q": Resources.of(cpu="1")})
    assert book.admit("q", "a", Resources.of(cpu="1", memory="100Gi"))


def test_gates_are_classified_from_our_point_of_view() -> None:
    assert classify_gates([]) is GateState.NONE
    assert classify_gates([GATE_NAME]) is GateState.OURS_ONLY
    assert classify_gates(["x", GATE_NAME]) is GateState.OURS_AND_OTHERS
    assert classify_gates(["x"]) is GateState.OTHERS_ONLY


def test_opt_in_needs_the_annotation_set_to_true() -> None:
    assert opted_in({GATE_NAME: "true"})
    assert not opted_in({GATE_NAME: "false"})
    assert not opted_in(None)


def test_gated_resource_accounting_excludes_only_our_gate_pods() -> None:
    total = gated_resources([(GateState.OURS_ONLY, ONE), (GateState.OURS_AND_OTHERS, ONE),
                             (GateState.OTHERS_ONLY, ONE), (GateState.NONE, ONE)])
    assert total == ONE + ONE


# --- property: allocated + reserved never exceeds the queue capability -------------------------
EVENTS = st.lists(
    st.tuples(st.sampled_from(["arrive", "direct", "allocate", "rollback", "delete", "session"]),
              st.integers(0, 7), st.integers(1, 4)),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(EVENTS, st.integers(1, 6))
@example(  # an eviction in a later session frees the room; the evicted pod reserves nothing
    [("arrive", 0, 1), ("allocate", 0, 1), ("session", 0, 1), ("rollback", 0, 1),
     ("arrive", 1, 1), ("session", 0, 1)], 1)
def test_allocated_plus_reserved_never_exceeds_capability(
    events: list[tuple[str, int, int]], cap_cpu: int
) -> None:
    """Random gated arrivals (capacity check), ungated pods, allocations, rollbacks, deletions
    and session rebuilds.

    Allocation is only attempted the way allocate does it: when the capacity check
    (`fits`, the allocatable callback) allows it. A rollback (statement discard) can only undo
    an allocation of the current session; undoing one made before the last rebuild is an
    eviction, and an evicted pod is deleted: it does not come back holding a reservation.
    """
    cap = Resources.of(cpu=str(cap_cpu))
    book = ReservationLedger({"q": cap})
    book.rebuild([], [])
    requests: dict[str, Resources] = {}
    allocated: set[str] = set()
    this_session: set[str] = set()
    direct: set[str] = set()
    for kind, pod, cpu in events:
        uid = f"p{pod}"
        if kind == "arrive" and uid not in requests:
            request = Resources.of(cpu=str(cpu))
            if book.admit("q", uid, request):
                requests[uid] = request
        elif kind == "direct" and uid not in requests:  # an ungated pod: allocate only
            request = Resources.of(cpu=str(cpu))
            if book.fits("q", uid, request):
                book.on_allocate("q", uid, request)
                requests[uid] = request
                allocated.add(uid)
                this_session.add(uid)
                direct.add(uid)
        elif kind == "allocate" and uid in requests and uid not in allocated:
            if book.fits("q", uid, requests[uid]):
                book.on_allocate("q", uid, requests[uid])
                allocated.add(uid)
                this_session.add(uid)
        elif kind == "rollback" and uid in allocated:
            book.on_deallocate("q", uid, requests[uid])
            allocated.discard(uid)
            if uid in direct or uid not in this_session:
                # an ungated pod back to pending holds nothing; an evicted pod is deleted
                direct.discard(uid)
                del requests[uid]
            this_session.discard(uid)
        elif kind == "delete" and uid in requests:
            if uid in allocated:
                book.on_deallocate("q", uid, requests[uid])
                allocated.discard(uid)
            book.drop(uid)
            direct.discard(uid)
            del requests[uid]
        elif kind == "session":  # rebuild from the "cluster": allocated pods and reservations
            this_session.clear()
            book.rebuild(
                [("q", requests[u]) for u in allocated],
                [("q", u, r) for u, r in requests.items() if u not in allocated],
            )
        total = book.allocated("q").get("cpu", 0) + book.reserved("q").get("cpu", 0)
        assert total <= cap["cpu"]
