"""The order in which an admission round serves its queues: guaranteed first, then by name.

Why: a round serves one queue after another, and under contention the queues served first
take the quota freed since the last round. Served by name alone, the last names of a cohort
waited longest, round after round: in bench_scale's 15,000-Job shape (6 sibling quotas, min
20 and max 120 cpu each, under a parent of 120), the Jobs created in the run's last, contended
~40 s waited 1.4-1.6 s in `cq-0-0` and 26-32 s in `cq-0-5` on average (issue 36). A quota's
min is what ElasticQuota guarantees it, so a queue whose quota holds less than its min, in
every resource the min names, is served before the queues that hold their min already (those
borrow beyond it). Within each group, name order, as before: with no min set anywhere (most
Koord-Queue manifests) the order is the name order. Usage is read once, at the start of the
round, so the full and the incremental rounds serve the same order.
"""

from __future__ import annotations

from collections.abc import Iterable

from koordqueue.domain.quota_tree import QuotaTree


def under_min(tree: QuotaTree, name: str) -> bool:
    """The quota holds less than its min in every resource its min names (a min of zeros, or
    none, guarantees nothing)."""
    quota = tree.get(name)
    if quota is None:
        return False
    guaranteed = {res: amount for res, amount in quota.min.items() if amount > 0}
    if not guaranteed:
        return False
    used = tree.used(name)
    return all(used.get(res, 0) < amount for res, amount in guaranteed.items())


def serve_order(tree: QuotaTree, names: Iterable[str]) -> list[str]:
    """The queues of a round in the order it serves them (module doc)."""
    return sorted(names, key=lambda name: (not under_min(tree, name), name))
