"""gang plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/gang/gang_test.go,
TestShouldSkipUnschedulableForReleasing, read through the condition gang writes at session
close (`unready_condition`): the case's expectation True means no unschedulable condition.

"partial termination" fails with the shortcut off (checked: a condition is written). The
other four are the shortcut's guards (a pending or pipelined replacement, a releasing task
never scheduled, too few tasks): with the shortcut off they still pass by design, so each is
checked against the shortcut with its guard removed instead (counting every releasing task,
ignoring pending and pipelined ones, ignoring minAvailable: each fails its case).
"""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api import JobInfo, PodGroupPhase, TaskInfo, TaskStatus
from koordqueue.scheduler.plugins.gang import releasing_covers_min, unready_condition

R, RUN, P, PIPE = TaskStatus.RELEASING, TaskStatus.RUNNING, TaskStatus.PENDING, TaskStatus.PIPELINED


def _job(min_available: int, tasks: list[tuple[str, TaskStatus, str]]) -> JobInfo:
    return JobInfo(
        "job-1",
        min_available=min_available,
        phase=PodGroupPhase.RUNNING,
        tasks=[
            TaskInfo(uid, uid, status=status, node_name=node or None) for uid, status, node in tasks
        ],
    )


CASES = [
    ("partial termination", 2, [("running", RUN, "node-1"), ("releasing", R, "node-2")], True),
    (
        "pending replacement still needs condition",
        2,
        [("running", RUN, "node-1"), ("releasing", R, "node-2"), ("replacement", P, "")],
        False,
    ),
    (
        "pipelined replacement still needs condition",
        2,
        [("running", RUN, "node-1"), ("releasing", R, "node-2"), ("replacement", PIPE, "node-3")],
        False,
    ),
    ("never scheduled releasing task is not counted", 1, [("releasing", R, "")], False),
    (
        "scheduled tasks below minAvailable",
        3,
        [("running", RUN, "node-1"), ("releasing", R, "node-2")],
        False,
    ),
]


@pytest.mark.parametrize(
    ("min_available", "tasks", "skip"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_releasing_tasks_on_nodes_spare_the_unschedulable_condition(
    min_available: int, tasks: list[tuple[str, TaskStatus, str]], skip: bool
) -> None:
    job = _job(min_available, tasks)
    assert not job.is_ready()
    assert releasing_covers_min(job) is skip
    assert (unready_condition(job, has_condition=False) is None) is skip
