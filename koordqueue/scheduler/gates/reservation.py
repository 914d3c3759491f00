"""Reserved queue capacity for un-gated, still-pending opt-in pods (SPEC 3.5).

Why: once a gated pod passes the queue capacity check its gate is removed asynchronously and
it is placed in a later session. Until then no other pod may take that room, or the pod we
let through would find its queue full. The ledger holds, per queue, what is allocated and what
is reserved; it is rebuilt each session, gains an entry when a pod passes, loses it when that
pod is allocated and gets it back when the allocation is rolled back. The candidate itself is
never counted twice. Each reservation records when it was made; with a timeout
(`--gate-reservation-timeout`, default 0 = never, as Volcano) one older than it is released
(`expire`). Kubernetes only lets scheduling gates be removed, never added back, so an expired
pod is not gated again: it stays pending without a reservation and is placed like any pod
when its queue has room (`ReservationClock` remembers it across sessions).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api.resource import EPSILON_NANOS
from koordqueue.scheduler.gates import names


class GateState(StrEnum):
    """Which scheduling gates a pod carries, from the point of view of this feature."""

    NONE = "none"
    OURS_ONLY = "ours-only"
    OURS_AND_OTHERS = "ours-and-others"
    OTHERS_ONLY = "others-only"


def classify_gates(gates: Iterable[str]) -> GateState:
    """Classify a pod's `spec.schedulingGates` names."""
    present = set(gates)
    if not present:
        return GateState.NONE
    ours = names.GATE_NAME in present
    if ours:
        return GateState.OURS_ONLY if len(present) == 1 else GateState.OURS_AND_OTHERS
    return GateState.OTHERS_ONLY


def opted_in(annotations: Mapping[str, str] | None) -> bool:
    """The pod asked for queue admission through the gate."""
    return (annotations or {}).get(names.OPT_IN_ANNOTATION, "").strip().lower() == (
        names.OPT_IN_VALUE
    )


def gated_resources(requests: Iterable[tuple[GateState, Resources]]) -> Resources:
    """Resources of gated pods, excluding only-our-gate pods.

    Why: only-our-gate pods take part in the capacity check themselves (and are reserved when
    they pass); counting them again as "gated demand" would make the queue look full twice.
    """
    acc: dict[str, int] = {}
    for state, res in requests:
        if state in (GateState.NONE, GateState.OURS_ONLY):
            continue
        for key, amount in res.items():
            acc[key] = acc.get(key, 0) + amount
    return Resources(acc)


@dataclass(frozen=True, slots=True)
class GateView:
    """Per-session facts about pods, by task uid, that the cluster adapter knows.

    candidates: carry only our gate and the opt-in annotation (may be released);
    reserved: opt-in, no gate left, still pending (hold a reservation).
    """

    candidates: frozenset[str] = frozenset()
    reserved: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Expiry:
    """A reservation released by the timeout: whose, in which queue, how much, how old."""

    uid: str
    queue: str
    request: Resources
    age: float


def _add_into(acc: dict[str, int], res: Mapping[str, int], sign: int) -> None:
    for key, amount in res.items():
        acc[key] = acc.get(key, 0) + sign * amount


class ReservationLedger:
    """Allocated and reserved resources per queue against each queue's capability.

    A capability of None is unlimited; resource names a capability does not list are unlimited
    too (as Volcano's queue capability).
    """

    __slots__ = (
        "_allocated", "_capability", "_entries", "_released", "_released_at", "_reserved",
        "_since",
    )

    def __init__(self, capabilities: Mapping[str, Resources | None]) -> None:
        self._capability = dict(capabilities)
        self._allocated: dict[str, dict[str, int]] = {}
        self._reserved: dict[str, dict[str, int]] = {}
        self._entries: dict[str, tuple[str, Resources]] = {}
        """uid -> (queue, request) of live reservations."""
        self._since: dict[str, float] = {}
        """uid -> when the live reservation was made (the caller's clock)."""
        self._released: dict[str, tuple[str, Resources]] = {}
        """uid -> reservation removed by an allocation, kept to restore on rollback."""
        self._released_at: dict[str, float] = {}
        """uid -> when that consumed reservation was made (a rollback keeps its age)."""

    # --- rebuild ---------------------------------------------------------------------------
    def rebuild(
        self,
        allocated: Iterable[tuple[str, Resources]],
        reserved: Iterable[tuple[str, str, Resources]],
        since: Mapping[str, float] | None = None,
    ) -> None:
        """Start a session: allocated (queue, resources) and reservations (queue, uid, req);
        `since` says when each reservation was made (missing: 0.0)."""
        self._allocated.clear()
        self._reserved.clear()
        self._entries.clear()
        self._since.clear()
        self._released.clear()
        self._released_at.clear()
        made = since or {}
        for queue, res in allocated:
            _add_into(self._allocated.setdefault(queue, {}), res, 1)
        for queue, uid, req in reserved:
            self.add(queue, uid, req, made.get(uid, 0.0))

    # --- views ------------------------------------------------------------------------------
    def allocated(self, queue: str) -> Resources:
        return Resources(self._allocated.get(queue, {}))

    def reserved(self, queue: str, excluding: str | None = None) -> Resources:
        """What is reserved in `queue`, minus `excluding`'s own reservation."""
        acc = dict(self._reserved.get(queue, {}))
        entry = self._entries.get(excluding) if excluding is not None else None
        if entry is not None and entry[0] == queue:
            _add_into(acc, entry[1], -1)
        return Resources(acc)

    def holds(self, uid: str) -> bool:
        return uid in self._entries

    def since(self, uid: str) -> float | None:
        """When uid's live reservation was made, or None without one."""
        return self._since.get(uid)

    def live(self) -> dict[str, tuple[str, Resources]]:
        """uid -> (queue, request) of the live reservations (a copy)."""
        return dict(self._entries)

    def fits(self, queue: str, uid: str, request: Resources) -> bool:
        """allocated + reserved (without uid's own) + request within the capability."""
        cap = self._capability.get(queue)
        if cap is None:
            return True
        allocated = self._allocated.get(queue, {})
        reserved = self._reserved.get(queue, {})
        own = self._entries.get(uid)
        own_req: Mapping[str, int] = own[1] if own is not None and own[0] == queue else {}
        for key, limit in cap.items():
            need = (
                allocated.get(key, 0) + reserved.get(key, 0) - own_req.get(key, 0)
                + request.get(key, 0)
            )
            if request.get(key, 0) > 0 and need > limit + EPSILON_NANOS:
                return False
        return True

    # --- changes ----------------------------------------------------------------------------
    def add(self, queue: str, uid: str, request: Resources, at: float = 0.0) -> None:
        """Reserve `request` for `uid`, made at time `at` (idempotent: the first time stays)."""
        if uid in self._entries:
            return
        self._entries[uid] = (queue, request)
        self._since[uid] = at
        _add_into(self._reserved.setdefault(queue, {}), request, 1)

    def admit(self, queue: str, uid: str, request: Resources, at: float = 0.0) -> bool:
        """The capacity check for a gated pod: reserve and return True when it fits."""
        if not self.fits(queue, uid, request):
            return False
        self.add(queue, uid, request, at)
        return True

    def on_allocate(self, queue: str, uid: str, request: Resources) -> None:
        """A task took resources: count it allocated; its reservation (if any) is consumed."""
        _add_into(self._allocated.setdefault(queue, {}), request, 1)
        entry = self._entries.pop(uid, None)
        if entry is not None:
            _add_into(self._reserved.setdefault(entry[0], {}), entry[1], -1)
            self._released[uid] = entry
            self._released_at[uid] = self._since.pop(uid, 0.0)

    def on_deallocate(self, queue: str, uid: str, request: Resources) -> None:
        """An allocation was rolled back (or evicted): give back; restore the reservation."""
        _add_into(self._allocated.setdefault(queue, {}), request, -1)
        entry = self._released.pop(uid, None)
        if entry is not None:
            self.add(entry[0], uid, entry[1], self._released_at.pop(uid, 0.0))

    def drop(self, uid: str) -> None:
        """Forget a reservation (its pod was deleted)."""
        entry = self._entries.pop(uid, None)
        self._since.pop(uid, None)
        if entry is not None:
            _add_into(self._reserved.setdefault(entry[0], {}), entry[1], -1)

    def expire(self, now: float, timeout: float) -> list[Expiry]:
        """Release every reservation made `timeout` or more before `now`; 0 or less: none.

        Why here: the ledger alone knows what is live; whoever calls it only executes the
        effect (an event). Oldest first, then by uid, so the outcome does not depend on
        insertion order.
        """
        if timeout <= 0:
            return []
        old = sorted(
            (at, uid) for uid, at in self._since.items() if now - at >= timeout
        )
        out: list[Expiry] = []
        for at, uid in old:
            queue, request = self._entries[uid]
            self.drop(uid)
            out.append(Expiry(uid, queue, request, now - at))
        return out


@dataclass(slots=True)
class ReservationClock:
    """Memory across sessions for the reservation timeout (the ledger is rebuilt each session).

    `since`: when each pod passed the capacity check (or, for a reservation this process
    never saw made, e.g. after a restart, when it was first seen: the clock starts again);
    `expired`: pods whose reservation timed out; they stay un-gated and pending but hold
    nothing, until they are placed or deleted. `now` is injectable (tests); `timeout` 0 = never.
    """

    timeout: float = 0.0
    now: Callable[[], float] = time.monotonic
    since: dict[str, float] = field(default_factory=dict)
    expired: set[str] = field(default_factory=set)

    def effective(self, view: GateView, now: float) -> GateView:
        """This session's view: expired pods reserve nothing; state of gone pods forgotten."""
        if self.timeout <= 0:
            return view
        watched = view.candidates | view.reserved
        self.expired &= view.reserved
        for uid in [u for u in self.since if u not in watched or u in self.expired]:
            del self.since[uid]
        for uid in view.reserved:
            if uid not in self.expired:
                self.since.setdefault(uid, now)
        if not self.expired:
            return view
        return GateView(view.candidates, view.reserved - self.expired)

    def admitted(self, uid: str, now: float) -> float:
        """uid passed the capacity check at `now`; returns when its reservation was made
        (a pod admitted again before its gate removal landed keeps its first time)."""
        return self.since.setdefault(uid, now)

    def record(self, expiries: Iterable[Expiry]) -> None:
        for e in expiries:
            self.expired.add(e.uid)
            self.since.pop(e.uid, None)
