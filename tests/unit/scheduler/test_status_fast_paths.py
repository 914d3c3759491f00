"""The per-placement status moves, interpod's allocate early exit and the tuple-backed
`Bind` (issue 16, part 2).

`JobInfo.allocate_pending` / `bind_allocated` spell out the Pending -> Allocated and
Allocated -> Binding moves every placement makes; they must leave a job exactly as
`update_task_status` does, from any status (other statuses take the general path).
interpod's allocate handler returns at once for most placements; it must still forget a
remembered eviction. `Bind` is a NamedTuple for a cheaper construction; it must still
compare like the frozen dataclass it replaced (equal only to a `Bind`) and stay immutable.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import default_config
from koordqueue.scheduler.api import JobInfo, NodeInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.api.task_info import PodAffinity, PodAffinityTerm
from koordqueue.scheduler.framework.indexed import index_snapshot
from koordqueue.scheduler.framework.result import Bind, Eviction, Reservation
from koordqueue.scheduler.framework.session import open_session
from koordqueue.scheduler.interpod import InterPodAffinity, pod_counts
from tests.unit.scheduler.builders import job, node, running, snapshot, task

STATUSES = list(TaskStatus)
HOST = "kubernetes.io/hostname"
REQUESTS = [Resources.of(cpu="1", memory="1Gi"), Resources.of(cpu="500m"), Resources.of()]


def _host(name: str) -> NodeInfo:
    return node(name, "8", "16Gi", labels={HOST: name})


def _one_per_host() -> PodAffinity:
    web = LabelSelector((("app", "web"),))
    return PodAffinity(anti_required=(PodAffinityTerm(HOST, web, frozenset({"default"})),))


def _job(statuses: list[TaskStatus], requests: list[int]) -> JobInfo:
    tasks = [
        TaskInfo(f"t{i}", f"t{i}", resreq=REQUESTS[r], status=s)
        for i, (s, r) in enumerate(zip(statuses, requests, strict=False))
    ]
    return JobInfo("j", tasks=tasks)


def _state(job: JobInfo) -> tuple[object, ...]:
    index = {s: list(b) for s, b in job.task_status_index.items() if b}
    return (
        index,
        {uid: t.status for uid, t in job.tasks.items()},
        job.allocated_amounts(),
        job.ready_task_num(),
    )


def _general(target: TaskStatus) -> Callable[[JobInfo, TaskInfo], None]:
    return lambda job, task: job.update_task_status(task, target)


@settings(max_examples=60, deadline=None)
@given(
    statuses=st.lists(st.sampled_from(STATUSES), min_size=1, max_size=8),
    requests=st.lists(st.integers(0, len(REQUESTS) - 1), min_size=8, max_size=8),
    moves=st.lists(st.tuples(st.integers(0, 7), st.booleans()), max_size=12),
)
def test_fast_status_moves_equal_update_task_status(
    statuses: list[TaskStatus], requests: list[int], moves: list[tuple[int, bool]]
) -> None:
    fast, plain = _job(statuses, requests), _job(statuses, requests)
    for which, allocate in moves:
        uid = f"t{which % len(statuses)}"
        if allocate:
            fast.allocate_pending(fast.tasks[uid])
            _general(TaskStatus.ALLOCATED)(plain, plain.tasks[uid])
        else:
            fast.bind_allocated(fast.tasks[uid])
            _general(TaskStatus.BINDING)(plain, plain.tasks[uid])
        assert _state(fast) == _state(plain)


def test_pending_to_binding_counts_once() -> None:
    job = _job([TaskStatus.PENDING], [0])
    task = job.tasks["t0"]
    job.allocate_pending(task)
    assert job.ready_task_num() == 1 and job.allocated_amounts()
    job.bind_allocated(task)
    assert task.status is TaskStatus.BINDING
    assert job.ready_task_num() == 1
    assert job.allocated_amounts() == dict(REQUESTS[0].items())
    assert "t0" not in job.task_status_index.get(TaskStatus.ALLOCATED, {})


def test_bind_equals_only_binds() -> None:
    fields = ("u", "ns", "p", "j", "n1")
    bind = Bind(*fields)
    assert bind == Bind(*fields) and hash(bind) == hash(Bind(*fields))
    assert bind != Bind("u", "ns", "p", "j", "n2")
    assert bind != Reservation(*fields)
    assert Reservation(*fields) != bind
    assert bind != fields
    assert bind != Eviction(*fields, "preempt")
    assert len({bind, Bind(*fields)}) == 1
    assert (bind.task, bind.namespace, bind.name, bind.job, bind.node) == fields


def test_bind_is_immutable() -> None:
    bind = Bind("u", "ns", "p", "j", "n1")
    with pytest.raises(AttributeError):
        bind.node = "n2"  # type: ignore[misc]


def test_a_pod_evicted_and_restored_before_the_counts_are_first_used_counts_again() -> None:
    # interpod's allocate handler returns at once while nothing is indexed, no term comes
    # with the pod and no eviction is remembered; a remembered eviction must still be
    # forgotten when the pod comes back (unevict), or the web pod would stop repelling.
    victim = running("victim", "n0", labels={"app": "web"})
    jobs = [job("v", [victim]), job("j", [task("p", pod_affinity=_one_per_host())])]
    session = open_session(index_snapshot(snapshot([_host("n0")], jobs)), default_config())
    ipa = InterPodAffinity(pod_counts(session))
    restored = session.jobs["v"].tasks["victim"]
    previous = restored.status
    session.evict_task(restored)
    session.unevict_task(session.jobs["v"].tasks["victim"], previous)
    mask = ipa.filter(session.jobs["j"].tasks["p"])
    assert mask is not None and not bool(mask[0])
