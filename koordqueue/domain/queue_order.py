"""The order in which an admission round serves its queues: least of its min held first.

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
min come after those with one, in name order among themselves: with no min set anywhere (most
Koord-Queue manifests) the order is the name order, as before. Ties go by name. Usage is read
once, at the round's start, so the full and the incremental rounds serve the same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from koordqueue.domain.quota_tree import QuotaTree


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


def serve_order(tree: QuotaTree, names: Iterable[str]) -> list[str]:
    """The queues of a round in the order it serves them (module doc)."""
    return sorted(names, key=lambda name: (share(tree, name), name))
