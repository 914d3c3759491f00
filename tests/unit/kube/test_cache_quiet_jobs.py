"""A session's cost follows what changed, not the bound pods (issue 19, part 1).

Bound standalone pods are Running jobs in the cache (as Volcano's PodGroup of such a pod is
after its first session), so no session reports them again; a snapshot reads the cache's
jobs instead of copying them; a bind or status update coming back is not parsed again.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.kube.scheduler import convert
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import default_config, run_session
from koordqueue.scheduler.api import JobInfo, PodGroupPhase, TaskInfo, TaskStatus
from koordqueue.scheduler.api.job_info import standalone_phase
from koordqueue.scheduler.framework import open_session, run_actions
from koordqueue.scheduler.framework.indexed import STALE_JOBS

from .cache_replay import SCHED, make_group, make_node, make_pod, make_queue, task_form

BOUND = 40


def _cluster(bound: int = BOUND) -> SchedulerCache:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("default", 1, 1))
    for i in range(4):
        cache.on_event(CachedKind.NODE, "ADDED", make_node(f"n{i}", 1, True, 64))
    for i in range(bound):
        cache.on_event(CachedKind.POD, "ADDED", make_pod(
            f"b{i:03d}", 2, True, None, f"n{i % 4}", "Running", 1, "default"))
    return cache


def test_bound_standalone_pods_add_no_phase_update_to_a_session() -> None:
    cache = _cluster()
    cache.on_event(CachedKind.POD, "ADDED", make_pod(
        "new", 3, True, None, None, "Pending", 1, "default"))
    result = run_session(cache.build().snapshot, default_config())
    assert [(b.task, b.job) for b in result.binds] == [("new", "pod/new")]
    # only the job this session placed changes phase; the 40 Running ones are not reported
    assert [(u.job, u.old, u.new) for u in result.phase_updates] == [
        ("pod/new", PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING)
    ]


def test_a_session_after_new_pods_visits_only_their_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = _cluster()
    run_session(cache.build().snapshot, default_config())  # the first session fills the memo
    cache.on_event(CachedKind.POD, "ADDED", make_pod(
        "new", 3, True, None, None, "Pending", 1, "default"))
    visited: list[str] = []
    original = JobInfo.session_phase

    def counted(job: JobInfo, unschedulable: bool) -> PodGroupPhase:
        visited.append(job.uid)
        return original(job, unschedulable)

    monkeypatch.setattr(JobInfo, "session_phase", counted)
    session = open_session(cache.build().snapshot, default_config())
    assert [job.uid for job in session.scan_jobs()] == ["pod/new"]
    run_actions(session)
    result = session.close()
    assert visited == ["pod/new"]
    assert [u.job for u in result.phase_updates] == ["pod/new"]


@pytest.mark.parametrize("status", list(TaskStatus))
def test_a_standalone_jobs_phase_is_what_session_close_makes_of_it(status: TaskStatus) -> None:
    node = None if status is TaskStatus.PENDING else "n"
    task = TaskInfo("t", "t", status=status, node_name=node)
    job = JobInfo("j", min_available=1, phase=PodGroupPhase.INQUEUE, tasks=[task])
    assert standalone_phase(task) is job.session_phase(False)


def test_a_snapshots_jobs_are_read_until_the_next_build_and_refused_after() -> None:
    cache = _cluster(bound=3)
    first = cache.build()
    assert cache.build() is first  # nothing changed: the same snapshot, still readable
    assert sorted(j.uid for j in first.snapshot.jobs) == ["pod/b000", "pod/b001", "pod/b002"]
    jobs = first.snapshot.jobs
    assert len(jobs) == 3 and [jobs[i] for i in range(3)] == list(jobs)
    cache.on_event(CachedKind.POD, "ADDED", make_pod(
        "new", 3, True, None, None, "Pending", 1, "default"))
    second = cache.build()
    assert len(second.snapshot.jobs) == 4
    with pytest.raises(RuntimeError, match=STALE_JOBS):
        list(first.snapshot.jobs)


def _converted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    original = convert.task_info

    def counted(pod: dict[str, Any]) -> TaskInfo:
        calls.append(str(pod["metadata"]["uid"]))
        return original(pod)

    monkeypatch.setattr(convert, "task_info", counted)
    return calls


def _task_of(cache: SchedulerCache, uid: str) -> TaskInfo:
    [job] = [j for j in cache.build().snapshot.jobs if uid in j.tasks]
    return job.tasks[uid]


def test_a_bind_coming_back_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _converted(monkeypatch)
    cache = _cluster(bound=0)
    pending = make_pod("p", 3, True, None, None, "Pending", 2, "default", tier="a")
    pending["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    cache.on_event(CachedKind.POD, "ADDED", pending)
    assert _task_of(cache, "p").status is TaskStatus.PENDING
    bound = make_pod("p", 4, True, None, "n1", "Running", 2, "default", tier="a")
    bound["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    cache.on_event(CachedKind.POD, "MODIFIED", bound)
    task = _task_of(cache, "p")
    assert calls == ["p"]
    expected = convert.task_info(bound)
    expected.job = task.job
    assert task_form(task) == task_form(expected)
    assert (task.status, task.node_name) == (TaskStatus.RUNNING, "n1")


def test_a_pod_whose_request_or_labels_change_is_parsed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _converted(monkeypatch)
    cache = _cluster(bound=0)
    cache.on_event(CachedKind.POD, "ADDED", make_pod("p", 3, True, None, None, "Pending", 1,
                                                     "default"))
    _task_of(cache, "p")
    cache.on_event(CachedKind.POD, "MODIFIED", make_pod("p", 4, True, None, None, "Pending", 3,
                                                        "default"))
    assert _task_of(cache, "p").resreq["cpu"] == 3 * 10**9
    cache.on_event(CachedKind.POD, "MODIFIED", make_pod("p", 5, True, None, None, "Pending", 3,
                                                        "default", tier="b"))
    assert dict(_task_of(cache, "p").labels) == {"tier": "b"}
    assert calls == ["p", "p", "p"]


def _edited(path: tuple[str, ...], value: object) -> dict[str, Any]:
    pod = make_pod("p", 1, True, None, None, "Pending", 1, "default")
    target: dict[str, Any] = pod
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return pod


@pytest.mark.parametrize(
    ("path", "value", "same"),
    [
        (("spec", "nodeName"), "n0", True),
        (("status", "phase"), "Running", True),
        (("metadata", "resourceVersion"), "9", True),
        (("metadata", "annotations"), {"x": "y"}, True),
        (("spec", "containers"), [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
         False),
        (("spec", "priority"), 5, False),
        (("spec", "tolerations"), [{"operator": "Exists"}], False),
        (("metadata", "labels"), {"a": "b"}, False),
        (("metadata", "creationTimestamp"), "2026-12-03T00:00:00Z", False),
        (("metadata", "namespace"), "other", False),
    ],
)
def test_only_placement_changes_reuse_a_conversion(
    path: tuple[str, ...], value: object, same: bool
) -> None:
    old = make_pod("p", 1, True, None, None, "Pending", 1, "default")
    assert convert.same_but_placement(old, _edited(path, value)) is same


def _one_fitting_pod() -> tuple[SchedulerCache, Any]:
    """One node with 4 CPUs and one pending pod of 3: only one of them fits at a time."""
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("default", 1, 1))
    cache.on_event(CachedKind.NODE, "ADDED", make_node("n0", 1, True, 4))
    cache.on_event(CachedKind.POD, "ADDED", make_pod(
        "p", 2, True, None, None, "Pending", 3, "default"))
    return cache, cache.build()


def _binds(built: Any) -> list[tuple[str, str]]:
    session = open_session(built.snapshot, default_config())
    run_actions(session)
    return [(b.task, b.node) for b in session.close().binds]


def test_a_session_after_a_closed_one_on_the_same_snapshot_sees_none_of_its_placements() -> None:
    _cache, built = _one_fitting_pod()
    first = open_session(built.snapshot, default_config())
    run_actions(first)
    assert [b.node for b in first.close().binds] == ["n0"]  # wrote the lent tensor
    second = open_session(built.snapshot, default_config())
    assert second.tensor is first.tensor  # lent again, not copied nor rebuilt
    run_actions(second)
    assert [b.node for b in second.close().binds] == ["n0"]  # n0's column was refreshed


def test_a_session_beside_an_open_one_sees_none_of_its_placements() -> None:
    _cache, built = _one_fitting_pod()
    held = open_session(built.snapshot, default_config())
    run_actions(held)  # holds the lent tensor, with p placed on n0
    assert _binds(built) == [("p", "n0")]
    assert held.close().binds[0].node == "n0"


def test_a_new_build_ends_a_lease_never_given_back() -> None:
    cache, built = _one_fitting_pod()
    run_actions(open_session(built.snapshot, default_config()))  # never closed
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("q1", 3, 1))
    assert _binds(cache.build()) == [("p", "n0")]


def test_the_podgroup_jobs_are_kept_group_by_group() -> None:
    cache = _cluster(bound=2)
    group = make_group("g0", 3, 1, "default")
    cache.on_event(CachedKind.POD_GROUP, "ADDED", group)
    cache.on_event(CachedKind.POD, "ADDED", make_pod(
        "m0", 4, True, "g0", None, "Pending", 1, "default"))
    built = cache.build()
    assert set(built.group_jobs) == {"uid-g0"} and set(built.groups) == {"ns/g0"}
    assert set(built.group_jobs) == set(cache.rebuild().group_jobs)
    cache.on_event(CachedKind.POD_GROUP, "DELETED", group)
    built = cache.build()
    assert set(built.group_jobs) == set() and set(built.groups) == set()
    assert set(cache.rebuild().group_jobs) == set()
