"""allocate action: volcano-sh/volcano pkg/scheduler/actions/allocate/allocate_test.go,
TestFareShareAllocate (action allocate; one tier: drf with preemptable and job order,
proportion with queue order and reclaimable (allocatable off), predicates, nodeorder). One
node of 5 cpu / 5G; queues q-1 and q-2 of weight 1; pod-small-1 (1 cpu, 1G) of q-1 runs.

The first case fails with proportion's queue order off; the second with the queue order
reading the shares of the session's start instead of the current ones (q-2 would go twice:
pod-small-2 placed, pod-large-1 left out): both checked. The third case, "queue's one jobs
has no pending tasks, should be put back to queues for next job", is not transcribed: a job
with nothing pending never enters koordqueue's job order, so there is no put-back for it to
exercise, and it would pass with any allocate that places a pod (docs/concepts.md).
"""

from __future__ import annotations

from koordqueue.scheduler.api import PodGroupPhase

from .harness import Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers

RUNNING, INQUEUE = PodGroupPhase.RUNNING, PodGroupPhase.INQUEUE
CONFIG = tiers(
    ("drf", {"Preemptable", "JobOrder"}),
    ("proportion", {"QueueOrder", "Reclaimable"}),
    ("predicates", {"Predicate"}),
    ("nodeorder", {"NodeOrder"}),
)
NODE = node("node-1", rl("5", "5G", {"pods": "10"}))


def _binds(pods: list[Pod], groups: list[PodGroup], queues: list[str]) -> dict[str, str]:
    snapshot = build([NODE], pods, groups, [queue(q) for q in queues], namespace="ns-1")
    return run(snapshot, CONFIG, "allocate").binds


def test_the_queue_with_the_lower_share_allocates_first() -> None:
    """TestFareShareAllocate, "queue with low DRF share value has high priority, should
    allocate first": q-2 (share 0) goes before q-1 (1/5); then 2 cpu are left for 2."""
    binds = _binds(
        [
            pod("pod-small-1", "node-1", True, rl("1", "1G"), "pg-small-1"),
            pod("pod-large-1", "", False, rl("2", "2G"), "pg-large-1"),
            pod("pod-large-2", "", False, rl("3", "2G"), "pg-large-2"),
        ],
        [
            pg("pg-small-1", "q-1", 0, RUNNING),
            pg("pg-large-1", "q-1", 0, INQUEUE),
            pg("pg-large-2", "q-2", 0, INQUEUE),
        ],
        ["q-1", "q-2"],
    )
    assert binds == {"ns-1/pod-large-2": "node-1"}


def test_a_queue_share_is_updated_before_it_is_put_back() -> None:
    """TestFareShareAllocate, "queue's DRF share value will be updated and its priority will
    change before it is put back into the priority queue": q-2's large pod, then q-1's, and
    no room is left for q-2's small one."""
    binds = _binds(
        [
            pod("pod-small-1", "node-1", True, rl("1", "1G"), "pg-small-1"),
            pod("pod-large-1", "", False, rl("2", "2G"), "pg-large-1"),
            pod("pod-large-2", "", False, rl("2", "2G"), "pg-large-2"),
            pod("pod-small-2", "", False, rl("1", "1G"), "pg-small-2"),
        ],
        [
            pg("pg-small-1", "q-1", 0, RUNNING),
            pg("pg-large-1", "q-1", 0, INQUEUE),
            pg("pg-small-2", "q-2", 0, INQUEUE),
            pg("pg-large-2", "q-2", 0, INQUEUE),
        ],
        ["q-1", "q-2"],
    )
    assert binds == {"ns-1/pod-large-1": "node-1", "ns-1/pod-large-2": "node-1"}
