"""What `kubectl describe elasticquota` says about a quota: its status conditions (issue 33).

Two conditions, Kueue's ClusterQueue style (one type per question, False with the reason):

- `Valid`: the last applied spec was accepted. False (reason InvalidQuota or QuotaCycle)
  when the controller refused it; the message says whether an earlier definition stays in
  force.
- `Active`: the quota admits units. False when it cannot: it was never valid, another
  namespace's copy of the name is in force (DuplicateQuotaName), its chain of parents loops
  (QuotaCycle) or stops at a missing quota (ParentNotFound), or its queue's policy is not
  served (AddQueueFail).

Each cause carries whether it also deserves a Warning event on the quota (once, when it
appears: `new_causes`); a missing parent does not, since applying a directory of quotas in
any order passes through it (the webhook warned at apply time, and the units' FailedScheduling
events name it). Pure: the controller (kube/controller/quotas.py) gathers the causes from its
state and writes what this returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from koordqueue.domain.names import (
    CONDITION_ACTIVE,
    CONDITION_VALID,
    MSG_QUOTA_ACTIVE,
    MSG_QUOTA_VALID,
    REASON_QUOTA_ACTIVE,
    REASON_QUOTA_VALID,
    ROOT_QUOTA,
)

TRUE: Final = "True"
FALSE: Final = "False"
MSG_CHAIN_CYCLE: Final = "its chain of parents loops ({cycle}); no unit of it is admitted"
MSG_CHAIN_MISSING: Final = (
    "quota {missing} on its chain of parents ({chain}) does not exist; no unit of it is admitted"
)


@dataclass(frozen=True, slots=True)
class Cause:
    """Why a condition is False: a reason (also the event's), a message, and whether it is
    worth a Warning event."""

    reason: str
    message: str
    event: bool = True


def chain_break(name: str, parents: Mapping[str, str]) -> tuple[str, tuple[str, ...]] | None:
    """How `name`'s chain of parents breaks: ("cycle", the loop) or ("missing", the path up
    to and including the missing quota); None when it reaches the root. `parents`: every
    quota in force, name -> parent."""
    path: list[str] = []
    current = name
    while current != ROOT_QUOTA:
        if current in path:
            return "cycle", (*path[path.index(current) :], current)
        if current not in parents:
            return "missing", (*path, current)
        path.append(current)
        current = parents[current]
    return None


def chain_message(kind: str, path: Sequence[str]) -> str:
    if kind == "cycle":
        return MSG_CHAIN_CYCLE.format(cycle=" -> ".join(path))
    return MSG_CHAIN_MISSING.format(missing=path[-1], chain=" -> ".join(path))


def _condition(  # noqa: PLR0917 (one call site, each argument named there)
    kind: str,
    causes: Sequence[Cause],
    ok_reason: str,
    ok_message: str,
    generation: int | None,
    previous: Mapping[str, Mapping[str, Any]],
    now: str,
) -> dict[str, Any]:
    status = FALSE if causes else TRUE
    reason = causes[0].reason if causes else ok_reason
    message = "; ".join(c.message for c in causes) if causes else ok_message
    before = previous.get(kind) or {}
    since = before.get("lastTransitionTime") if before.get("status") == status else None
    condition: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or now,
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def conditions_by_type(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The object's status.conditions by type."""
    found = (obj.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in found if isinstance(c, Mapping)}


def quota_conditions(
    obj: Mapping[str, Any],
    valid: Sequence[Cause],
    active: Sequence[Cause],
    queue_namespace: str,
    now: str,
) -> list[dict[str, Any]]:
    """The Valid and Active conditions of `obj` for these causes (a transition time is kept
    while a condition's status stays the same)."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    generation = (obj.get("metadata") or {}).get("generation")
    gen = generation if isinstance(generation, int) else None
    previous = conditions_by_type(obj)
    active_ok = MSG_QUOTA_ACTIVE.format(namespace=queue_namespace, name=name)
    return [
        _condition(CONDITION_VALID, valid, REASON_QUOTA_VALID, MSG_QUOTA_VALID, gen, previous, now),
        _condition(CONDITION_ACTIVE, active, REASON_QUOTA_ACTIVE, active_ok, gen, previous, now),
    ]


def same_conditions(a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]]) -> bool:
    """Equal but for transition times (what a write would change)."""

    def key(conditions: Iterable[Mapping[str, Any]]) -> set[tuple[Any, ...]]:
        return {
            (
                c.get("type"),
                c.get("status"),
                c.get("reason"),
                c.get("message"),
                c.get("observedGeneration"),
            )
            for c in conditions
        }

    return key(a) == key(b)


def new_causes(causes: Iterable[Cause], reported: Iterable[Mapping[str, Any]]) -> list[Cause]:
    """The causes worth an event that the `reported` conditions do not state yet: one event
    per cause, not one per resync (after a restart, the conditions on the object are what
    was reported)."""
    said = [str(c.get("message") or "") for c in reported if c.get("status") == FALSE]
    return [c for c in causes if c.event and not any(c.message in text for text in said)]
