"""Queue-level preemption as Koord-Queue does it now (issue 35 point 7): which units are victims.

Koord-Queue's manual "Queue-Level Preemption" and its elasticquotav1alpha1preemption suite:
a queue with `koord-queue/wait-for-pods-running` keeps its admitted units whose pods are not
all running in an *assumed set*. A unit about to be admitted while that set is not empty marks
every reclaimable member that sorts after it (the reserve path); with
`koord-queue/enable-queueunit-preemption` too, a unit that does not fit marks reclaimable
members, lowest first, until what they would release covers its request for every resource it
asks for (the path after a failed fit). A mark is `reclaimState.replicas = replicas - running`
on each admission: only pods not running are taken back, never a bound one. The victim keeps
its quota until it is reclaimed; the preemptor is admitted by a later round.

Pure rules here; the round (round_runner.py) applies them and the engine keeps the marks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from koordqueue.domain.names import (
    ENABLE_PREEMPTION_ANNOTATION,
    MSG_PREEMPTION_REFUSED,
    PREEMPTIBLE_LABEL,
)
from koordqueue.domain.policies import INTELLIGENT
from koordqueue.domain.queue_unit import NOT_YET_RUNNING, AdmissionCount, QueueUnit
from koordqueue.domain.resources import Resources

DEFAULT_RECLAIM_PROTECT_SECONDS: Final = 0.0
"""Koord-Queue's defaultReclaimProtectTime: 0, no protection."""


def refusal(queue: str, policy: str, annotations: Mapping[str, str]) -> str | None:
    """Why the queue refuses preemption it is asked for (None: it does not refuse): the
    Intelligent policy does not implement it (Koord-Queue answers every attempt with an error)."""
    if policy == INTELLIGENT and annotations.get(ENABLE_PREEMPTION_ANNOTATION) == "true":
        return MSG_PREEMPTION_REFUSED.format(queue=queue)
    return None


def running_of(unit: QueueUnit, admission: AdmissionCount) -> int:
    """Replicas of the admission that run: as reported, else all of them once the unit's
    phase says its pods are placed or running, none before."""
    if admission.running is not None:
        return min(admission.running, admission.replicas)
    return 0 if unit.phase in NOT_YET_RUNNING else admission.replicas


def reclaimable(unit: QueueUnit) -> tuple[AdmissionCount, ...]:
    """The unit's admissions with reclaimState.replicas set to what a preemption takes back
    (replicas - running). Empty: nothing to reclaim (or a reclaim already under way). A unit
    admitted with no pod sets listed counts as one replica, not running before it is placed."""
    if not unit.admitted or unit.reclaiming:
        return ()
    if not unit.admissions:
        return (AdmissionCount("", 1, 0, 1),) if unit.phase in NOT_YET_RUNNING else ()
    marked = tuple(
        AdmissionCount(a.name, a.replicas, a.running, a.replicas - running_of(unit, a))
        for a in unit.admissions
    )
    return marked if any(a.reclaim for a in marked) else ()


def is_assumed(unit: QueueUnit) -> bool:
    """In its queue's assumed set: admitted, some replica not running, not being reclaimed."""
    if not unit.admitted or unit.reclaiming:
        return False
    if not unit.admissions:
        return unit.phase in NOT_YET_RUNNING
    return any(running_of(unit, a) < a.replicas for a in unit.admissions)


def is_preemptible(unit: QueueUnit, default: bool = True) -> bool:
    """The label quota.scheduling.alibabacloud.com/preemptible, else the default switch."""
    value = unit.labels.get(PREEMPTIBLE_LABEL)
    if value == "true":
        return True
    if value == "false":
        return False
    return default


@dataclass(frozen=True, slots=True)
class VictimRules:
    """What makes an assumed unit a victim, besides sorting after the preemptor."""

    protect_seconds: float = DEFAULT_RECLAIM_PROTECT_SECONDS
    default_preemptible: bool = True

    def protected(self, unit: QueueUnit, now: float) -> bool:
        """Allocated less than the protect time ago (status.lastAllocateTime)."""
        if self.protect_seconds <= 0 or unit.last_allocate is None:
            return False
        return now - unit.last_allocate < self.protect_seconds

    def eligible(self, unit: QueueUnit, now: float) -> bool:
        return (
            is_assumed(unit)
            and is_preemptible(unit, self.default_preemptible)
            and not self.protected(unit, now)
            and bool(reclaimable(unit))
        )


@dataclass(frozen=True, slots=True)
class Mark:
    """A victim and its admissions with reclaimState.replicas to write."""

    unit: QueueUnit
    admissions: tuple[AdmissionCount, ...]

    @property
    def replicas(self) -> int:
        return sum(a.reclaim for a in self.admissions)


OrderKey = Callable[[QueueUnit], tuple[object, ...]]


def _after(preemptor: QueueUnit, assumed: Sequence[QueueUnit], key: OrderKey) -> list[QueueUnit]:
    first = key(preemptor)
    return [u for u in assumed if u.uid != preemptor.uid and key(u) > first]


def reserve_victims(
    preemptor: QueueUnit,
    assumed: Sequence[QueueUnit],
    key: OrderKey,
    rules: VictimRules,
    now: float,
) -> tuple[Mark, ...]:
    """The reserve path: every eligible assumed unit sorting after `preemptor`, in queue order."""
    after = sorted(_after(preemptor, assumed, key), key=key)
    return tuple(Mark(u, reclaimable(u)) for u in after if rules.eligible(u, now))


def released_share(mark: Mark) -> Resources:
    """What the victim's quota loses once its marked replicas are reclaimed."""
    total = sum(a.replicas for a in mark.admissions)
    taken = mark.replicas
    if total <= 0 or taken >= total:
        return mark.unit.resource
    return Resources({k: v * taken // total for k, v in mark.unit.resource.items()})


def fit_victims(
    preemptor: QueueUnit,
    assumed: Sequence[QueueUnit],
    key: OrderKey,
    rules: VictimRules,
    now: float,
) -> tuple[Mark, ...]:
    """The path after a failed fit (Koord-Queue's dry run): eligible assumed units sorting
    after `preemptor`, lowest first, until what they release covers the preemptor's request
    for every resource it asks for (the request, not what it lacks); when all of them do
    not cover it, those found are still the answer (`released` says how much they free)."""
    wanted = {k: v for k, v in preemptor.resource.items() if v > 0}
    candidates = sorted(_after(preemptor, assumed, key), key=key, reverse=True)
    freed: dict[str, int] = {}
    marks: list[Mark] = []
    for unit in candidates:
        if all(freed.get(k, 0) >= v for k, v in wanted.items()):
            break
        if not rules.eligible(unit, now):
            continue
        mark = Mark(unit, reclaimable(unit))
        marks.append(mark)
        for name, amount in released_share(mark).items():
            freed[name] = freed.get(name, 0) + amount
    return tuple(marks)


@dataclass(frozen=True, slots=True)
class Proposal:
    """A preemption found in its queue's turn of a round, marked only if `needs` still fits
    the preemptor's chain once every queue has had its turn: a queue served later can take
    the room the preemptor counted on (round_runner.RoundRunner.proposals)."""

    queue: str
    preemptor: QueueUnit
    marks: tuple[Mark, ...]
    needs: Resources


def released(marks: Sequence[Mark]) -> Resources:
    """What the quota gets back once every mark is reclaimed."""
    total = Resources()
    for mark in marks:
        total = total + released_share(mark)
    return total
