"""Reclaimable pods (issue 35 point 6): as pods of an admitted workload finish and are no
longer needed, their share goes back to the quota.

Koord-Queue has the field (`QueueUnit.status.reclaimablePods`, `[{name, count}]` per pod set,
"only increases while the queue unit holds a reservation") and no behaviour; the rules here
are Kueue's. A JobSet: each replicated Job's succeeded child Jobs times its pods per replica.
A batch/v1 Job (Kueue's `Job.ReclaimablePods`): nothing while parallelism is 1
or nothing succeeded; else, with `remaining = completions - succeeded` (completions defaults
to parallelism), `parallelism - remaining` pods once fewer remain than run at once. A unit
then holds each pod set's `count - reclaimable` pods (Kueue's workload usage), never less than
nothing: the pod set's count times its per-pod request, less the reclaimed pods'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordqueue.domain.resources import Resources


@dataclass(frozen=True, slots=True)
class ReclaimablePod:
    """`count` pods of pod set `name` no longer need their share."""

    name: str
    count: int

    def to_object(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count}


class InvalidReclaimablePodsError(ValueError):
    """status.reclaimablePods cannot be read; `field` names the entry."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


def job_reclaimable_pods(
    pod_set: str, parallelism: int, completions: int | None, succeeded: int
) -> tuple[ReclaimablePod, ...]:
    """Kueue's rule for a batch/v1 Job (module docstring)."""
    if parallelism == 1 or succeeded == 0:
        return ()
    remaining = (parallelism if completions is None else completions) - succeeded
    if remaining >= parallelism:
        return ()
    return (ReclaimablePod(pod_set, parallelism - remaining),)


def jobset_reclaimable_pods(
    replicated: Iterable[tuple[str, int, int, int]],
) -> tuple[ReclaimablePod, ...]:
    """Kueue's rule for a JobSet: per replicated Job (name, replicas, pods per replica,
    succeeded child Jobs), `succeeded x pods per replica` once 0 < succeeded <= replicas."""
    return tuple(
        ReclaimablePod(name, succeeded * per_replica)
        for name, replicas, per_replica, succeeded in replicated
        if 0 < succeeded <= replicas
    )


def parse_reclaimable_pods(raw: object) -> tuple[ReclaimablePod, ...]:
    """status.reclaimablePods as stored (absent: none); raises naming the bad entry."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidReclaimablePodsError("status.reclaimablePods", "must be a list")
    out: list[ReclaimablePod] = []
    for i, entry in enumerate(raw):
        field = f"status.reclaimablePods[{i}]"
        if not isinstance(entry, Mapping):
            raise InvalidReclaimablePodsError(field, "must be an object {name, count}")
        name, count = entry.get("name"), entry.get("count")
        if not isinstance(name, str) or not name:
            raise InvalidReclaimablePodsError(f"{field}.name", "must be a non-empty string")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidReclaimablePodsError(
                f"{field}.count", f"{count!r}: must be an integer >= 0"
            )
        out.append(ReclaimablePod(name, count))
    return tuple(out)


def merged(
    held: Sequence[ReclaimablePod], now: Iterable[ReclaimablePod]
) -> tuple[ReclaimablePod, ...]:
    """What to store while the unit holds its reservation: per pod set the larger count (a
    count never goes down then), in the order first seen; zero counts left out."""
    counts: dict[str, int] = {}
    for pod in (*held, *now):
        counts[pod.name] = max(counts.get(pod.name, 0), pod.count)
    return tuple(ReclaimablePod(name, count) for name, count in counts.items() if count)


@dataclass(frozen=True, slots=True)
class PodSetShare:
    """A pod set as the unit asks for it: `count` pods of `request` each."""

    name: str
    count: int
    request: Resources


def reclaimed(
    pod_sets: Iterable[PodSetShare], reclaimable: Iterable[ReclaimablePod]
) -> Resources:
    """The share given back: per pod set min(reclaimable, count) x its per-pod request (a
    count naming no pod set gives nothing back)."""
    by_name = {pod.name: pod.count for pod in reclaimable}
    total = Resources()
    for pod_set in pod_sets:
        pods = min(by_name.get(pod_set.name, 0), pod_set.count)
        if pods > 0:
            total = total + pod_set.request * pods
    return total

