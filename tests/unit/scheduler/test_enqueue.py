"""enqueue: Pending -> Inqueue through the overcommit / proportion votes."""

from __future__ import annotations

from koordqueue.scheduler import run_session
from koordqueue.scheduler.api import PodGroupPhase, QueueInfo

from .builders import DEFAULT_TIERS, config, job, node, res, snapshot, task

ENQUEUE = config("enqueue", *DEFAULT_TIERS)


def test_job_without_min_resources_is_enqueued() -> None:
    pending = job("j", [task("t", cpu="100")], phase=PodGroupPhase.PENDING)
    result = run_session(snapshot([node("n1", cpu="1")], [pending]), ENQUEUE)
    assert [(u.job, u.new) for u in result.phase_updates] == [("j", PodGroupPhase.INQUEUE)]


def test_overcommit_admits_up_to_factor_times_capacity() -> None:
    fits = job("a", [task("a1")], phase=PodGroupPhase.PENDING, min_resources=res("4"), creation=0.0)
    over = job("b", [task("b1")], phase=PodGroupPhase.PENDING, min_resources=res("1"), creation=1.0)
    result = run_session(snapshot([node("n1", cpu="4", memory="8Gi")], [fits, over]), ENQUEUE)
    # 4 cpu x 1.2 = 4.8: the first job (4) fits, the second (4 + 1 = 5) does not.
    assert {u.job: u.new for u in result.phase_updates} == {"a": PodGroupPhase.INQUEUE}


def test_proportion_rejects_job_beyond_queue_capability() -> None:
    queues = [QueueInfo("q", capability=res("2"))]
    big = job("big", [task("t")], queue="q", phase=PodGroupPhase.PENDING, min_resources=res("3"))
    result = run_session(snapshot([node("n1", cpu="8")], [big], queues), ENQUEUE)
    assert result.phase_updates == ()


def test_pending_podgroup_is_not_allocated_when_enqueue_is_configured() -> None:
    held = job("j", [task("t")], phase=PodGroupPhase.PENDING, min_resources=res("100"))
    result = run_session(
        snapshot([node("n1")], [held]), config("enqueue, allocate", *DEFAULT_TIERS)
    )
    assert result.binds == ()
