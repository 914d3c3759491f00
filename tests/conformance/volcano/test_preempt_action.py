"""preempt action: cases of volcano-sh/volcano pkg/scheduler/actions/preempt/preempt_test.go,
TestPreempt (action preempt, topology-aware preemption off; one tier: conformance with
preemptable, gang with preemptable/job pipelined/job starving, priority with task order/job
order/preemptable/job pipelined/job starving, proportion with overused/allocatable/queue
order; priority classes high-priority = 100000, low-priority = 10).

Pods built without a priority have task priority 1, as Volcano's TaskInfo defaults it.
Also TestNormalPreemptRechecksPredicateAfterEviction (its test plugin's predicate, here a
plain per-node predicate of a test plugin). TestTopologyAwarePreempt is in
test_preempt_topology_aware.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import SchedulerConfig
from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, QueueInfo, TaskInfo
from koordqueue.scheduler.api.task_info import TaskStatus
from koordqueue.scheduler.framework import registry
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.session import Session

from .harness import Outcome, Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers

INQUEUE = PodGroupPhase.INQUEUE
PODS = {"pods": "10"}
HIGH, LOW = 100000, 10
ONE = rl("1", "1G")
CONFIG = tiers(
    ("conformance", {"Preemptable"}),
    ("gang", {"Preemptable", "JobPipelined", "JobStarving"}),
    ("priority", {"TaskOrder", "JobOrder", "Preemptable", "JobPipelined", "JobStarving"}),
    ("proportion", {"Overused", "Allocatable", "QueueOrder"}),
)


def p(
    name: str,
    node_name: str,
    request: Resources,
    group: str,
    *,
    preemptable: bool = True,
    priority: int = 1,
    preempt_never: bool = False,
) -> Pod:
    """A pod of the case: Running when it has a node, else Pending."""
    return pod(
        name,
        node_name,
        bool(node_name),
        request,
        group,
        preemptable=preemptable,
        priority=priority,
        preempt_never=preempt_never,
    )


def _preempt(
    nodes: list[NodeInfo], pods: list[Pod], groups: list[PodGroup], queues: list[QueueInfo]
) -> Outcome:
    return _preempt_with(CONFIG, nodes, pods, groups, queues)


def _preempt_with(
    config: SchedulerConfig,
    nodes: list[NodeInfo],
    pods: list[Pod],
    groups: list[PodGroup],
    queues: list[QueueInfo],
) -> Outcome:
    return run(build(nodes, pods, groups, queues, namespace="c1"), config, "preempt")


def test_no_preemption_when_the_node_has_enough_idle_resources() -> None:
    """TestPreempt, "do not preempt if there are enough idle resources"."""
    out = _preempt(
        [node("n1", rl("10", "10G", PODS))],
        [
            p("preemptee1", "n1", ONE, "pg1"),
            p("preemptee2", "n1", ONE, "pg1"),
            p("preemptor1", "", ONE, "pg1"),
        ],
        [pg("pg1", "q1", 3, INQUEUE, task_min={"": 3})],
        [queue("q1")],
    )
    assert out.evicted == []


def test_no_preemption_for_a_pipelined_job() -> None:
    """TestPreempt, "do not preempt if job is pipelined"."""
    out = _preempt(
        [node("n1", rl("3", "3G", PODS))],
        [
            p("preemptee1", "n1", ONE, "pg1"),
            p("preemptee2", "n1", ONE, "pg1"),
            p("preemptee3", "n1", ONE, "pg2"),
            p("preemptor2", "", ONE, "pg2"),
        ],
        [
            pg("pg1", "q1", 1, INQUEUE, task_min={"": 2}),
            pg("pg2", "q1", 1, INQUEUE, task_min={"": 2}),
        ],
        [queue("q1")],
    )
    assert out.evicted == []


def test_one_task_of_a_lower_priority_job_is_preempted() -> None:
    """TestPreempt, "preempt one task of different job to fit both jobs on one node"."""
    out = _preempt(
        [node("n1", rl("2", "2G", PODS))],
        [
            p("preemptee1", "n1", ONE, "pg1"),
            p("preemptee2", "n1", ONE, "pg1", preemptable=False),
            p("preemptor1", "", ONE, "pg2"),
            p("preemptor2", "", ONE, "pg2"),
        ],
        [
            pg("pg1", "q1", 1, INQUEUE, priority=LOW, task_min={"": 2}),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 2}),
        ],
        [queue("q1")],
    )
    assert out.evicted == ["c1/preemptee1"]


def test_enough_tasks_are_preempted_for_a_large_task() -> None:
    """TestPreempt, "preempt enough tasks to fit large task of different job"."""
    out = _preempt(
        [node("n1", rl("6", "6G", PODS))],
        [
            p("preemptee1", "n1", ONE, "pg1"),
            p("preemptee2", "n1", ONE, "pg1"),
            p("preemptee3", "n1", ONE, "pg1", preemptable=False),
            p("preemptor1", "", rl("5", "5G"), "pg2"),
        ],
        [
            pg("pg1", "q1", 1, INQUEUE, priority=LOW, task_min={"": 3}),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
        ],
        [queue("q1")],
    )
    assert out.evicted == ["c1/preemptee1", "c1/preemptee2"]


def test_lower_priority_job_is_preempted_to_stay_within_the_queue() -> None:
    """TestPreempt, "preempt low priority job in same queue" (the queue's capability, not
    the node, is what is short)."""
    out = _preempt(
        [node("n1", rl("12", "12G", PODS))],
        [p("preemptee1", "n1", rl("3", "3G"), "pg1"), p("preemptor1", "", rl("3", "3G"), "pg2")],
        [
            pg("pg1", "q1", 0, INQUEUE, priority=LOW, task_min={}),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
        ],
        [queue("q1", None, rl("4", "4G"))],
    )
    assert out.evicted == ["c1/preemptee1"]


def test_no_preemption_when_the_queue_can_take_the_task() -> None:
    """TestPreempt, "preempt low priority job in same queue: allocatable and has enough
    resource, don't preempt"."""
    out = _preempt(
        [node("n1", rl("12", "12G", PODS))],
        [p("preemptee1", "n1", rl("3", "3G"), "pg1"), p("preemptor1", "", rl("3", "3G"), "pg2")],
        [
            pg("pg1", "q1", 1, INQUEUE, priority=LOW, task_min={}),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
        ],
        [queue("q1", None, rl("6", "6G"))],
    )
    assert out.evicted == []


def test_non_preemptable_and_higher_priority_pods_are_spared() -> None:
    """TestPreempt, "preempt low priority job in same queue but not pod with
    preemptable=false or higher priority"."""
    out = _preempt(
        [node("n1", rl("12", "12G", PODS))],
        [
            p("preemptee1", "n1", ONE, "pg1", preemptable=False),
            p("preemptee2", "n1", ONE, "pg1"),
            p("preemptee3", "n1", ONE, "pg1", priority=HIGH),
            p("preemptor1", "", ONE, "pg2"),
        ],
        [
            pg("pg1", "q1", 1, INQUEUE, priority=LOW, task_min={}),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
        ],
        [queue("q1", None, rl("3", "3G"))],
    )
    assert out.evicted == ["c1/preemptee2"]


def test_evictions_are_rolled_back_when_the_queue_cannot_take_the_preemptor() -> None:
    """TestPreempt, "rollback evictions when preemptor exceeds queue capacity after evicting
    victims"."""
    out = _preempt(
        [node("n1", rl("10", "10G", PODS))],
        [
            p("preemptee1", "n1", ONE, "pg1"),
            p("preemptee2", "n1", ONE, "pg1"),
            p("preemptor1", "", rl("4", "4G"), "pg2"),
        ],
        [
            pg("pg1", "q1", 1, INQUEUE, priority=LOW, task_min={"": 2}),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
        ],
        [queue("q1", None, rl("3", "3G"))],
    )
    assert out.evicted == []
    assert out.pipelined == {}


def test_only_the_evictions_of_the_node_where_preemption_succeeds_are_kept() -> None:
    """TestPreempt, "only commit evictions on the node where preemption succeeds"."""
    out = _preempt(
        [node("n1", rl("3", "3G", PODS)), node("n2", rl("4", "4G", PODS))],
        [
            p("preemptee1", "n1", ONE, "pg1"),
            p("preemptee2", "n2", rl("4", "4G"), "pg3"),
            p("preemptor1", "", rl("3", "3G"), "pg2"),
        ],
        [
            pg("pg1", "q1", 0, INQUEUE, priority=LOW, task_min={}),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
            pg("pg3", "q1", 0, INQUEUE, priority=LOW, task_min={}),
        ],
        [queue("q1", None, rl("6", "6G"))],
    )
    assert out.evicted == ["c1/preemptee2"]
    assert out.pipelined == {"c1/pg2": {"c1/preemptor1": "n2"}}


def test_preemptors_of_one_queue_survive_another_queue_intra_job_pass() -> None:
    """TestPreempt, "multi-queue: preemptorTasks must not be overwritten by intra-job
    preemption of another queue"."""
    out = _preempt(
        [node("n1", rl("2", "2G", PODS))],
        [
            p("q1-runner1", "n1", ONE, "pg1"),
            p("q2-preemptee1", "n1", ONE, "pg2"),
            p("q2-preemptor1", "", ONE, "pg3"),
        ],
        [
            pg("pg1", "q1", 1, INQUEUE, task_min={"": 1}),
            pg("pg2", "q2", 0, INQUEUE, priority=LOW, task_min={}),
            pg("pg3", "q2", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
        ],
        [queue("q1"), queue("q2", None, rl("4", "4G"))],
    )
    assert out.evicted == ["c1/q2-preemptee1"]


def test_task_with_preemption_policy_never_does_not_preempt() -> None:
    """TestPreempt, "can not preempt resources when task preemption policy is never"."""
    out = _preempt(
        [node("n1", rl("1", "1Gi", {"pods": "1"}))],
        [
            p("preemptee1", "n1", ONE, "pg1"),
            p("preemptor1", "", ONE, "pg2", preempt_never=True),
        ],
        [pg("pg1", "q1", 0, INQUEUE, priority=LOW), pg("pg2", "q1", 1, INQUEUE, priority=HIGH)],
        [queue("q1")],
    )
    assert out.evicted == []


WITH_PREDICATES = tiers(
    ("conformance", {"Preemptable"}),
    ("gang", {"Preemptable", "JobPipelined", "JobStarving"}),
    ("priority", {"TaskOrder", "JobOrder", "Preemptable", "JobPipelined", "JobStarving"}),
    ("proportion", {"Overused", "Allocatable", "QueueOrder"}),
    ("predicates", {"Predicate"}),
)
"""The case's tiers plus predicates: its `pods` check fails the full node with a reason
eviction resolves (Volcano: Unschedulable), so the node stays a preemption candidate."""
POD_SLOT_CONFIGS = pytest.mark.parametrize(
    "config", [CONFIG, WITH_PREDICATES], ids=["as written", "with predicates"]
)


@POD_SLOT_CONFIGS
def test_a_pod_slot_is_freed_for_a_high_priority_pod_with_requests(
    config: SchedulerConfig,
) -> None:
    """TestPreempt, "unBestEffort high-priority pod preempt BestEffort low-priority pod in same
    queue": the node takes one pod, held by a best-effort pod; evicting it frees the slot
    (Volcano counts `pods` as a resource). As written, fails without the pod slot in
    preempt's fit (checked: the preemptor was pipelined onto the full node with nothing
    evicted); with predicates, fails when the full node is not a candidate (checked by
    giving preempt the predicates plugin's filter with its `pods` limit)."""
    out = _preempt_with(
        config,
        [node("n1", rl("12", "12G", {"pods": "1"}))],
        [
            p("preemptee1", "n1", rl(), "pg1"),
            p("preemptor1", "", rl("3", "3G"), "pg2"),
        ],
        [
            pg("pg1", "q1", 0, INQUEUE, priority=LOW, task_min={}),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
        ],
        [queue("q1", None, rl("6", "6G"))],
    )
    assert out.evicted == ["c1/preemptee1"]
    assert out.pipelined == {"c1/pg2": {"c1/preemptor1": "n1"}}


@POD_SLOT_CONFIGS
def test_a_pod_slot_is_freed_for_a_best_effort_high_priority_pod(config: SchedulerConfig) -> None:
    """TestPreempt, "BestEffort high-priority pod preempt BestEffort low-priority pod in same
    queue". Fails without the pod slot in preempt's fit, or (with predicates) without the
    full node as a candidate (checked, as above)."""
    out = _preempt_with(
        config,
        [node("n1", rl("12", "12G", {"pods": "1"}))],
        [p("preemptee1", "n1", rl(), "pg1"), p("preemptor1", "", rl(), "pg2")],
        [
            pg("pg1", "q1", 0, INQUEUE, priority=LOW, task_min={}),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
        ],
        [queue("q1", None, rl("6", "6G"))],
    )
    assert out.evicted == ["c1/preemptee1"]


DEVICE_FIT = "device-fit-after-eviction"


class DeviceFitAfterEviction(Plugin):
    """The test's predicate plugin: the task named "preemptor" does not fit a node while a
    task named "preemptee" there is not Releasing (a device the resources do not show)."""

    name = DEVICE_FIT

    def on_session_open(self, session: Session) -> None:
        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            if task.name != "preemptor":
                return None
            for other in node.tasks.values():
                if other.name == "preemptee" and other.status is not TaskStatus.RELEASING:
                    return "hidden device capacity is occupied"
            return None

        session.add_predicate_fn(self.name, predicate)


@pytest.fixture
def device_fit() -> Iterator[None]:
    registry.register_plugin_builder(DEVICE_FIT, DeviceFitAfterEviction)
    yield
    registry.unregister_plugin_builder(DEVICE_FIT)


@pytest.mark.usefixtures("device_fit")
def test_preemption_rechecks_the_predicates_after_each_eviction() -> None:
    """TestNormalPreemptRechecksPredicateAfterEviction: the node has room, but a plugin's
    predicate rejects the preemptor until the victim is Releasing; preempt evicts it and
    pipelines the preemptor (tiers: conformance preemptable; gang with preemptable off, job
    pipelined, job starving; priority; proportion; the test plugin with predicate). Fails
    without the predicate re-check after each eviction (checked: the preemptor was
    pipelined with nothing evicted)."""
    config = tiers(
        ("conformance", {"Preemptable"}),
        ("gang", {"JobPipelined", "JobStarving"}),
        ("priority", {"TaskOrder", "JobOrder", "Preemptable", "JobPipelined", "JobStarving"}),
        ("proportion", {"Overused", "Allocatable", "QueueOrder"}),
        (DEVICE_FIT, {"Predicate"}),
    )
    snapshot = build(
        [node("n1", rl("2", "2G", PODS))],
        [
            p("preemptee", "n1", ONE, "pg-low"),
            p("preemptor", "", ONE, "pg-high"),
        ],
        [
            pg("pg-low", "q1", 1, INQUEUE, priority=LOW, task_min={"": 1}),
            pg("pg-high", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1}),
        ],
        [queue("q1")],
        namespace="c1",
    )
    out = run(snapshot, config, "preempt")
    assert out.evicted == ["c1/preemptee"]
    assert out.pipelined == {"c1/pg-high": {"c1/preemptor": "n1"}}
