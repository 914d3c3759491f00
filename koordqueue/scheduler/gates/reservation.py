"""Reserved queue capacity for un-gated, still-pending opt-in pods (SPEC 3.5).

Why: once a gated pod passes the queue capacity check its gate is removed asynchronously and
it is placed in a later session. Until then no other pod may take that room, or the pod we
let through would find its queue full. The ledger holds, per queue, what is allocated and what
is reserved; it is rebuilt each session, gains an entry when a pod passes, loses it when that
pod is allocated and gets it back when the allocation is rolled back. The candidate itself is
never counted twice. Reservations have no timeout (documented limitation: a pod that never
fits any node holds its reservation until it is deleted or placed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


def _add_into(acc: dict[str, int], res: Mapping[str, int], sign: int) -> None:
    for key, amount in res.items():
        acc[key] = acc.get(key, 0) + sign * amount


class ReservationLedger:
    """Allocated and reserved resources per queue against each queue's capability.

    A capability of None is unlimited; resource names a capability does not list are unlimited
    too (as Volcano's queue capability).
    """

    __slots__ = ("_allocated", "_capability", "_entries", "_released", "_reserved")

    def __init__(self, capabilities: Mapping[str, Resources | None]) -> None:
        self._capability = dict(capabilities)
        self._allocated: dict[str, dict[str, int]] = {}
        self._reserved: dict[str, dict[str, int]] = {}
        self._entries: dict[str, tuple[str, Resources]] = {}
        """uid -> (queue, request) of live reservations."""
        self._released: dict[str, tuple[str, Resources]] = {}
        """uid -> reservation removed by an allocation, kept to restore on rollback."""

    # --- rebuild ---------------------------------------------------------------------------
    def rebuild(
        self,
        allocated: Iterable[tuple[str, Resources]],
        reserved: Iterable[tuple[str, str, Resources]],
    ) -> None:
        """Start a session: allocated (queue, resources) and reservations (queue, uid, req)."""
        self._allocated.clear()
        self._reserved.clear()
        self._entries.clear()
        self._released.clear()
        for queue, res in allocated:
            _add_into(self._allocated.setdefault(queue, {}), res, 1)
        for queue, uid, req in reserved:
            self.add(queue, uid, req)

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
    def add(self, queue: str, uid: str, request: Resources) -> None:
        """Reserve `request` for `uid` (idempotent)."""
        if uid in self._entries:
            return
        self._entries[uid] = (queue, request)
        _add_into(self._reserved.setdefault(queue, {}), request, 1)

    def admit(self, queue: str, uid: str, request: Resources) -> bool:
        """The capacity check for a gated pod: reserve and return True when it fits."""
        if not self.fits(queue, uid, request):
            return False
        self.add(queue, uid, request)
        return True

    def on_allocate(self, queue: str, uid: str, request: Resources) -> None:
        """A task took resources: count it allocated; its reservation (if any) is consumed."""
        _add_into(self._allocated.setdefault(queue, {}), request, 1)
        entry = self._entries.pop(uid, None)
        if entry is not None:
            _add_into(self._reserved.setdefault(entry[0], {}), entry[1], -1)
            self._released[uid] = entry

    def on_deallocate(self, queue: str, uid: str, request: Resources) -> None:
        """An allocation was rolled back (or evicted): give back; restore the reservation."""
        _add_into(self._allocated.setdefault(queue, {}), request, -1)
        entry = self._released.pop(uid, None)
        if entry is not None:
            self.add(entry[0], uid, entry[1])

    def drop(self, uid: str) -> None:
        """Forget a reservation (its pod was deleted)."""
        entry = self._entries.pop(uid, None)
        if entry is not None:
            _add_into(self._reserved.setdefault(entry[0], {}), entry[1], -1)
