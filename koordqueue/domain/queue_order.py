"""The order in which an admission round serves its queues: least of its min held first,
then the queue whose head has the higher priority and has waited the longest.

Why: a round serves one queue after another, and under contention the queues served first
take the quota freed since the last round. Served by name alone, the last names of a cohort
waited longest, round after round: in bench_scale's 15,000-Job shape (6 sibling quotas, min
20 and max 120 cpu each, under a parent of 120), the Jobs created in the run's last, contended
~40 s waited 1.4-1.6 s in `cq-0-0` and 26-32 s in `cq-0-5` on average (issue 36). Serving the
queues under their min first only evened the first 20 cpu: one large Job is a queue's whole
min there, and past it the names decided again (2.5 s against 23.4 s).

A quota's min is what ElasticQuota guarantees it, so a round serves first the queue that holds
the least of its guarantee: its share is what it holds over its min, in the resource where
that is most (Volcano's proportion and DRF order queues by such a share). Quotas without a
min come after those with one.

Equal shares are common (every queue of a cohort back at 0 once its short Jobs finish), and
the queue served first in a round takes all the quota freed since the last one. Broken by
name, those ties starved the last names again: in the same shape, with the share order,
`cq-0-5` admitted nothing for 20 s while `cq-0-0` took every freed cpu (large-class waits
2.9 s against 20.9 s). So ties go, as Kueue orders the heads of a cohort's queues, to the
queue whose head (the unit it would offer first) has the higher priority, then to the one
that has waited longest (its first attempt); the name decides only what is still equal.
Usage is read once, at the round's start, so the full and the incremental rounds serve the
same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from koordqueue.domain.quota_tree import QuotaTree
from koordqueue.domain.unit_index import Order

Head = tuple[int, bool, float]
"""A queue's head as it is ordered (`policies.order_key`'s first three): priority negated,
preemptible, first attempt."""

_NONE: Head = (0, False, 0.0)
"""Stands in for a missing head (after the queues with one: the key's `head is None` first)."""


def _guaranteed(tree: QuotaTree, name: str) -> dict[str, int]:
    """The quota's min, its positive amounts only (a min of zeros guarantees nothing)."""
    quota = tree.get(name)
    return {} if quota is None else {res: a for res, a in quota.min.items() if a > 0}


def share(tree: QuotaTree, name: str) -> float:
    """What the quota holds over its min, in the resource where that is most (inf: no min)."""
    guaranteed = _guaranteed(tree, name)
    if not guaranteed:
        return math.inf
    used = tree.used(name)
    return float(max(used.get(res, 0) / amount for res, amount in guaranteed.items()))


def under_min(tree: QuotaTree, name: str) -> bool:
    """The quota holds less than its min in every resource its min names (compared exactly:
    nano-units of memory pass a float's 53 bits)."""
    guaranteed = _guaranteed(tree, name)
    if not guaranteed:
        return False
    used = tree.used(name)
    return all(used.get(res, 0) < amount for res, amount in guaranteed.items())


def serve_order(
    tree: QuotaTree, names: Iterable[str], heads: Mapping[str, Head] | None = None
) -> list[str]:
    """The queues of a round in the order it serves them (module doc); `heads`: each
    queue's head (a queue missing from it, with nothing to offer, goes after those with one
    of its share)."""
    found: Mapping[str, Head] = heads or {}

    def key(name: str) -> tuple[float, bool, Head, str]:
        head = found.get(name)
        return (share(tree, name), head is None, head or _NONE, name)

    return sorted(names, key=key)


def offered_heads(
    waiting: Mapping[str, Order], backing: Mapping[str, set[str]]
) -> dict[str, Head]:
    """Each queue's head among the units a round offers: its index order without the units
    held back this round (`backing`: backing off, inactive), as a full scan sorts them."""
    heads: dict[str, Head] = {}
    for name, order in waiting.items():
        skip = backing.get(name)
        for key, unit in zip(order.keys, order.units, strict=True):
            if not skip or unit.uid not in skip:
                heads[name] = key[:3]
                break
    return heads
