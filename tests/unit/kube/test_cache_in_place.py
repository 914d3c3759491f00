"""Jobs updated in place in the scheduler cache (issue 19).

A pod's change (created into a PodGroup, assumed, bound, started, finished, forgotten) no
longer remakes its job: the cache swaps the pod's task in the job (`JobInfo.replace_task`),
or, when only its placement moved among Binding, Bound and Running on the same node, moves
the very task object (`JobInfo.move_task`) and leaves the node as it is. Either way the
snapshot must equal one converted from scratch, and a session's own copies of jobs never see
the change.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import default_config
from koordqueue.scheduler.api import JobInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.framework import open_session

from .cache_replay import (
    GROUPS,
    NODES,
    QUEUES,
    SCHED,
    canonical,
    decisions,
    make_node,
    make_pod,
    make_queue,
    replay,
)

LIFE_PODS = [f"p{i}" for i in range(4)]  # the replayer's pod names


@st.composite
def lifecycle(draw: st.DrawFn, uid: str) -> list[tuple[Any, ...]]:
    """One pod's life as the scheduler sees it: created pending, assumed on a node, its bind
    coming back (mostly to that node), started, finished; or forgotten after the assume."""
    group = draw(st.sampled_from([None, None, *GROUPS]))
    node = draw(st.sampled_from(NODES))
    steps: list[tuple[Any, ...]] = [
        ("pod", uid, True, group, None, "Pending", draw(st.integers(1, 2)),
         draw(st.sampled_from(QUEUES)), None),
        ("assume", uid, node),
    ]
    if draw(st.integers(0, 5)) == 0:
        steps.append(("forget", uid))
        return steps
    back = draw(st.sampled_from([node, node, node, *NODES]))  # a bind to elsewhere, rarely
    steps.append(("edit", uid, "node", back))
    for phase in draw(st.sampled_from([(), ("Running",), ("Running", "Succeeded"),
                                       ("Failed",)])):
        steps.append(("edit", uid, "phase", phase))
    return steps


@st.composite
def interleaved(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Several pods' lives interleaved at random, with builds anywhere in between."""
    lives = [draw(lifecycle(uid)) for uid in LIFE_PODS]
    setup: list[tuple[Any, ...]] = [
        *(("queue", q, 1) for q in QUEUES), *(("node", n, True, 4) for n in NODES),
        *(("group", g, draw(st.integers(1, 2)), QUEUES[0]) for g in GROUPS),
    ]
    stream = setup
    while any(lives):
        life = draw(st.sampled_from([life for life in lives if life]))
        stream.append(life.pop(0))
        if draw(st.booleans()):
            stream.append(("build",))
    stream.append(("build",))
    return stream


def _checked(cache: SchedulerCache) -> None:
    built = cache.build()
    rebuilt = cache.rebuild()
    assert canonical(built) == canonical(rebuilt)
    assert dict(built.pending) == rebuilt.pending


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interleaved())
def test_jobs_updated_in_place_through_pod_lives_equal_a_full_rebuild(
    stream: list[tuple[Any, ...]],
) -> None:
    cache = replay(stream, _checked)
    assert decisions(cache.build()) == decisions(cache.rebuild())


def _cache() -> SchedulerCache:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("default", 1, 1))
    for name in ("n0", "n1"):
        cache.on_event(CachedKind.NODE, "ADDED", make_node(name, 1, True, 4))
    cache.on_event(CachedKind.POD, "ADDED", make_pod(
        "p", 2, True, None, None, "Pending", 1, "default"))
    cache.build()
    return cache


def _node(cache: SchedulerCache, name: str) -> Any:
    return next(n for n in cache.build().snapshot.nodes if n.name == name)


def test_a_bind_coming_back_keeps_the_task_and_leaves_the_node_as_it_is() -> None:
    cache = _cache()
    cache.assume("p", "n0")
    job = cache.build().snapshot.index.jobs["pod/p"]
    task, node = job.tasks["p"], _node(cache, "n0")
    assert (task.status, node.tasks["p"]) == (TaskStatus.BINDING, task)
    cache.on_event(CachedKind.POD, "MODIFIED", make_pod(
        "p", 3, True, None, "n0", "Pending", 1, "default"))
    built = cache.build()
    assert built.snapshot.index.jobs["pod/p"] is job and job.tasks["p"] is task
    assert task.status is TaskStatus.BOUND
    assert _node(cache, "n0") is node  # not copied: Binding and Bound take the same room
    assert "p" not in built.pending
    assert canonical(built) == canonical(cache.rebuild())


def test_a_bind_coming_back_to_another_node_moves_the_task() -> None:
    cache = _cache()
    cache.assume("p", "n0")
    cache.build()
    cache.on_event(CachedKind.POD, "MODIFIED", make_pod(
        "p", 3, True, None, "n1", "Pending", 1, "default"))
    built = cache.build()
    assert "p" not in _node(cache, "n0").tasks
    assert _node(cache, "n1").tasks["p"] is built.snapshot.index.jobs["pod/p"].tasks["p"]
    assert canonical(built) == canonical(cache.rebuild())


def test_a_sessions_own_copy_of_a_job_does_not_see_an_update_in_place() -> None:
    cache = _cache()
    session = open_session(cache.build().snapshot, default_config())
    own = session.jobs["pod/p"]  # a job the session may write: its own copy
    cache.assume("p", "n0")
    shared = cache.build().snapshot.index.jobs["pod/p"]
    assert shared.tasks["p"].status is TaskStatus.BINDING
    assert own is not shared
    assert [(t.status, t.node_name) for t in own.tasks.values()] == [(TaskStatus.PENDING, None)]


def test_a_queue_annotation_change_moves_a_standalone_job_between_queue_sums() -> None:
    cache = _cache()
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("q1", 1, 1))
    cache.on_event(CachedKind.POD, "MODIFIED", make_pod(
        "p", 3, True, None, None, "Pending", 1, "q1"))
    built = cache.build()
    index = built.snapshot.index
    assert index.jobs["pod/p"].queue == "q1"
    assert "pod/p" in index.queues["q1"].jobs and "default" not in index.queues
    assert canonical(built) == canonical(cache.rebuild())


# --- JobInfo.replace_task / move_task: what a job made from its tasks would hold -----------
STATUSES = list(TaskStatus)


def _task(uid: str, status: TaskStatus, cpu: int, gpu: int | None) -> TaskInfo:
    amounts = {"cpu": cpu} if gpu is None else {"cpu": cpu, "gpu": gpu}
    node = None if status is TaskStatus.PENDING else "n"
    return TaskInfo(uid, uid, status=status, resreq=Resources(amounts), node_name=node)


tasks = st.builds(_task, st.just(""), st.sampled_from(STATUSES), st.integers(0, 2),
                  st.sampled_from([None, 0, 1]))


def _form(job: JobInfo) -> tuple[object, ...]:
    return (
        list(job.tasks), [id(t) for t in job.tasks.values()],
        [(s, list(b)) for s, b in sorted(job.task_status_index.items()) if b],
        sorted(job.task_status_index) == sorted(s for s, b in job.task_status_index.items() if b),
        dict(job.allocated_amounts()), job.ready_task_num(),
    )


def _renamed(task: TaskInfo, uid: str) -> TaskInfo:
    return _task(uid, task.status, task.resreq.get("cpu", 0), task.resreq.get("gpu"))


@settings(max_examples=200, deadline=None)
@given(st.lists(tasks, min_size=1, max_size=5), st.data())
def test_replace_task_leaves_the_job_a_job_made_from_its_tasks_would_be(
    drawn: list[TaskInfo], data: st.DataObject,
) -> None:
    members = [_renamed(t, f"t{i}") for i, t in enumerate(drawn)]
    job = JobInfo("j", tasks=members)
    at = data.draw(st.integers(0, len(members) - 1))
    new = _renamed(data.draw(tasks), members[at].uid)
    after = [new if i == at else t for i, t in enumerate(members)]
    job.replace_task(members[at], new)
    assert _form(job) == _form(JobInfo("j", tasks=after))
    assert new.job == "j"


@settings(max_examples=200, deadline=None)
@given(st.lists(tasks, min_size=1, max_size=5), st.data())
def test_move_task_among_allocated_statuses_equals_a_job_made_afresh(
    drawn: list[TaskInfo], data: st.DataObject,
) -> None:
    members = [_renamed(t, f"t{i}") for i, t in enumerate(drawn)]
    job = JobInfo("j", tasks=members)
    kept = [TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING]
    movable = [t for t in members if t.status in kept]
    if not movable:
        return
    task = data.draw(st.sampled_from(movable))
    job.move_task(task, data.draw(st.sampled_from(kept)))
    assert _form(job) == _form(JobInfo("j", tasks=members))


def test_replace_task_refuses_a_task_of_another_uid() -> None:
    job = JobInfo("j", tasks=[_task("a", TaskStatus.PENDING, 1, None)])
    with pytest.raises(ValueError):
        job.replace_task(job.tasks["a"], _task("b", TaskStatus.PENDING, 1, None))
