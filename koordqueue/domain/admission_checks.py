"""Admission checks: a reservation waits for outside controllers before the unit is released
(issue 35 point 5).

Koord-Queue's `Queue.spec.admissionChecks[] {name, labelSelector}` says which checks a unit
of that queue must pass; `QueueUnit.status.admissionChecks` carries Kueue's
`AdmissionCheckState` (name, state, lastTransitionTime, message), which each check's
controller sets. A unit that reserves quota on a queue with matching checks goes to
Reserved with each check Pending; all Ready releases it (Dequeued, or SchedReady in strict
dequeue mode); one Retry or Rejected backs it off. Koord-Queue's QueueUnitController reads
only the unit's states, so a check removed from the queue still blocks there; here a state
counts only while its check is still asked for (a removed check counts as Ready).

Pure: plain data in, plain data out; the controller (kube/controller/checks.py) writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

CHECKS_FIELD: Final = "admissionChecks"
"""Queue.spec.admissionChecks and QueueUnit.status.admissionChecks."""

PENDING: Final = "Pending"
READY: Final = "Ready"
RETRY: Final = "Retry"
REJECTED: Final = "Rejected"
STATES: Final = (PENDING, READY, RETRY, REJECTED)
"""Kueue's CheckState values (kueue.x-k8s.io/v1beta1)."""

MSG_RESERVED: Final = "Reserved resources success, waiting admission checks to be ready"
"""Koord-Queue's status message of a reservation."""
MSG_RESERVED_EVENT: Final = "quota reserved; waiting for admission checks {checks}"
MSG_PENDING_ON: Final = "waiting for {controller}"
"""A Pending entry whose AdmissionCheck is Active: the controller that answers it."""
MSG_PENDING_INACTIVE: Final = "AdmissionCheck {name} ({controller}) is not Active: {why}"
"""A Pending entry whose AdmissionCheck is not Active (Kueue would hold the whole queue)."""
MSG_SCHED_READY: Final = "Waiting scheduler to schedule this queueUnit"
"""Koord-Queue's status message of a strict-dequeue admission (SchedReady)."""
MSG_ALL_READY: Final = "all admission checks success"
"""Koord-Queue's status message once every check is Ready."""
MSG_CHECK_FAILED: Final = (
    "admission check failed: {check} is {state}{detail}; retry in {delay:.0f}s"
)
"""Koord-Queue writes "admission check failed"; the check, its state and message are added."""

_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


class InvalidAdmissionCheckError(ValueError):
    """A Queue's spec.admissionChecks entry that cannot be read; `field` is its path."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def holds(self, labels: Mapping[str, str]) -> bool:
        """metav1.LabelSelectorRequirement's semantics (NotIn holds on a missing key)."""
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None  # DoesNotExist


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """One entry of Queue.spec.admissionChecks."""

    name: str
    match_labels: tuple[tuple[str, str], ...] | None = None
    """None: no labelSelector (every unit of the queue); () with no expressions: the empty
    selector, which also selects every unit."""
    match_expressions: tuple[Requirement, ...] = ()

    def applies_to(self, labels: Mapping[str, str]) -> bool:
        if self.match_labels is None:
            return True
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        return all(r.holds(labels) for r in self.match_expressions)


def parse_checks(raw: object, path: str = "spec.admissionChecks") -> tuple[CheckSpec, ...]:
    """A Queue's spec.admissionChecks; raises InvalidAdmissionCheckError naming the entry."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidAdmissionCheckError(path, f"must be a list, got {raw!r}")
    out: list[CheckSpec] = []
    for i, entry in enumerate(raw):
        at = f"{path}[{i}]"
        if not isinstance(entry, Mapping):
            raise InvalidAdmissionCheckError(at, f"must be an object, got {entry!r}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidAdmissionCheckError(f"{at}.name", "must be a non-empty string")
        if any(c.name == name for c in out):
            raise InvalidAdmissionCheckError(f"{at}.name", f"duplicate check {name!r}")
        out.append(_with_selector(name, entry.get("labelSelector"), f"{at}.labelSelector"))
    return tuple(out)


def _with_selector(name: str, raw: object, at: str) -> CheckSpec:
    if raw is None:
        return CheckSpec(name)
    if not isinstance(raw, Mapping):
        raise InvalidAdmissionCheckError(at, f"must be an object, got {raw!r}")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise InvalidAdmissionCheckError(f"{at}.matchLabels", "must be an object")
    requirements: list[Requirement] = []
    for j, expr in enumerate(raw.get("matchExpressions") or ()):
        where = f"{at}.matchExpressions[{j}]"
        if not isinstance(expr, Mapping):
            raise InvalidAdmissionCheckError(where, "must be an object")
        operator, values = expr.get("operator"), tuple(str(v) for v in expr.get("values") or ())
        if operator not in _OPERATORS:
            raise InvalidAdmissionCheckError(f"{where}.operator", f"unknown {operator!r}")
        if (operator in ("In", "NotIn")) != bool(values):
            raise InvalidAdmissionCheckError(
                f"{where}.values", f"{operator} needs values" if not values else
                f"{operator} takes no values"
            )
        requirements.append(Requirement(str(expr.get("key") or ""), str(operator), values))
    pairs = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
    return CheckSpec(name, pairs, tuple(requirements))


def required(checks: Iterable[CheckSpec], labels: Mapping[str, str]) -> tuple[str, ...]:
    """The names of the checks a unit with `labels` must pass, in the queue's order."""
    return tuple(c.name for c in checks if c.applies_to(labels))


@dataclass(frozen=True, slots=True)
class CheckState:
    """Kueue's AdmissionCheckState."""

    name: str
    state: str = PENDING
    last_transition_time: str = ""
    message: str = ""

    def to_object(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "lastTransitionTime": self.last_transition_time,
            "message": self.message,
        }


def states_from_objects(raw: object) -> tuple[CheckState, ...]:
    """status.admissionChecks as read (entries without a name are dropped)."""
    out: list[CheckState] = []
    for obj in raw if isinstance(raw, list) else ():
        if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
            continue
        out.append(
            CheckState(
                obj["name"],
                str(obj.get("state") or PENDING),
                str(obj.get("lastTransitionTime") or ""),
                str(obj.get("message") or ""),
            )
        )
    return tuple(out)


def pending_states(
    names: Sequence[str], now: str, messages: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Every check Pending: what a fresh reservation writes (a retry starts over);
    `messages[i]`, when given, is check i's message (pending_message)."""
    said = tuple(messages) + ("",) * (len(names) - len(messages))
    return [CheckState(n, PENDING, now, m).to_object() for n, m in zip(names, said, strict=False)]


@dataclass(frozen=True, slots=True)
class CheckObject:
    """What is read of Kueue's `AdmissionCheck` named as a Queue's check: the controller
    that answers it (spec.controllerName) and its Active condition, which that controller
    sets (Kueue holds a ClusterQueue whose check is missing or not Active)."""

    name: str
    controller_name: str
    active: bool
    reason: str = ""
    message: str = ""


def check_object(obj: Mapping[str, Any]) -> CheckObject | None:
    """An AdmissionCheck object as read (None without a name). No Active condition, or one
    not True, is not Active (Kueue's rule: the check's controller marks it)."""
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        return None
    controller = str((obj.get("spec") or {}).get("controllerName") or "")
    active = next(
        (
            c
            for c in (obj.get("status") or {}).get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == "Active"
        ),
        None,
    )
    if active is None:
        return CheckObject(name, controller, False, "", "no Active condition")
    return CheckObject(
        name,
        controller,
        active.get("status") == "True",
        str(active.get("reason") or ""),
        str(active.get("message") or ""),
    )


def pending_message(check: CheckObject | None) -> str:
    """A Pending entry's message: which controller answers it, and whether its
    AdmissionCheck is Active; "" for a check no AdmissionCheck names (Koord-Queue's free
    names, which still work)."""
    if check is None:
        return ""
    if check.active:
        return MSG_PENDING_ON.format(controller=check.controller_name)
    why = ": ".join(p for p in (check.reason, check.message) if p)
    return MSG_PENDING_INACTIVE.format(
        name=check.name, controller=check.controller_name, why=why or "not Active"
    )


def labelled(names: Iterable[str], objects: Mapping[str, CheckObject]) -> str:
    """Check names for an event, each with its controller when an AdmissionCheck names it."""
    return ", ".join(
        f"{n} ({objects[n].controller_name})" if n in objects else n for n in names
    )


class Verdict(Enum):
    WAIT = "wait"
    """A required check is Pending (or has no state yet): stay Reserved."""
    READY = "ready"
    """Every required check is Ready: release the unit."""
    BACK_OFF = "back-off"
    """A required check is Retry or Rejected: release the reservation, back off."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    verdict: Verdict
    failed: CheckState | None = None
    """The first Retry or Rejected check (BACK_OFF)."""


def evaluate(states: Iterable[CheckState], asked: Iterable[str]) -> Evaluation:
    """What a Reserved unit's check states call for; only the checks its queue still asks
    for count (a check removed from the queue counts as Ready)."""
    wanted = tuple(dict.fromkeys(asked))
    by_name = {s.name: s for s in states if s.name in wanted}
    for name in wanted:
        state = by_name.get(name)
        if state is not None and state.state in (RETRY, REJECTED):
            return Evaluation(Verdict.BACK_OFF, state)
    if all(name in by_name and by_name[name].state == READY for name in wanted):
        return Evaluation(Verdict.READY)
    return Evaluation(Verdict.WAIT)


def failure_message(failed: CheckState, delay: float) -> str:
    detail = f" ({failed.message})" if failed.message else ""
    return MSG_CHECK_FAILED.format(
        check=failed.name, state=failed.state, detail=detail, delay=delay
    )


def parse_queue_list(raw: str) -> frozenset[str]:
    """`--queue-list`: comma-separated Queue names (empty: every queue)."""
    return frozenset(q.strip() for q in raw.split(",") if q.strip())


def strict_for(queue: str, strict: bool, queue_list: frozenset[str]) -> bool:
    """Whether strict dequeue mode holds on `queue` (Koord-Queue's --strictDequeueMode
    scoped by --queue-list: an empty list means every queue)."""
    return strict and (not queue_list or queue in queue_list)
