"""gangpreempt and gangreclaim: cases of volcano-sh/volcano v1.15.1 pkg/scheduler/actions/
gangpreempt/gangpreempt_test.go, gangreclaim/gangreclaim_test.go, utils/bundle_test.go,
utils/util_test.go and utils/simulate_test.go, and priority_test.go
TestUnifiedEvictableFn_GangReclaimPermitsAll (the first version with these actions; the
peer vc-scheduler, v1.14.1, has none).

Volcano's cases build bare sessions field by field; here each runs in a real session over a
snapshot with the same jobs, tasks and nodes (a domain's nodes are a HyperNode's). Not
transcribed (koordqueue has no PodGroup sub-groups): bundle_test's three sub-job cases
(SubJobGroupSlackCapsSafe, MixedLegacyAndSubJobBothEnforced, AlreadyBrokenSubJob...),
simulate_test's sub-job worksheet cases (CollectPendingTasksForJobStartup_WorksheetOrder,
...ForRunningJob_FirstWorksheetSubJobOnly) and its nominated-node cases (NominatedHint...,
IgnoresNominatedNodeOutsideDomain, FallbackWhenNominatedMissing/Infeasible: koordqueue does
not model a pod's status.nominatedNodeName); TestParseArguments of both actions are
transcribed through `configurations:`.

Switched off and run (each fails then, checked): the whole-bundle switch
(RespectAllowWholeBundle); the PodGroup's preemptable (RespectVictimJobPreemptable, both
actions); the reclaimable-queue filter (ReclaimableCrossQueueOnly); the safe/whole split
(CreateJobBundles SafeAndWhole and NoTaskMinAvailable, and RespectAllowWholeBundle); whole
bundles kept only whole (ApplyAllowedTasks); the type order (SortBundlesForPreempt) and the
return-on-investment order (both ROI cases); the domains' cap (PickDomains MaxDomainsAndDedup,
whose cap hides the dedup); the cluster-top fallback (both Fallback cases); the dry run's
rollback (PipelineFailureRollsBackEviction); idle nodes before future-idle ones (Prefers-
IdleNode); gangreclaim's free pass in priority (GangReclaimPermitsAll). Cases whose answer
is the empty one hold with their own switch off and fail with another: AllowVictimJob-
WhenPreemptableUnset (fails when an absent key reads as false), the not-ready job's all-safe
bundle (fails with the short cut removed), NoFeasibleNode and Guards-like cases (fail when a
task is pipelined without room), the hard job with no domain (fails with the fallback given
to hard jobs too); checked.
"""

from __future__ import annotations

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, parse_config
from koordqueue.scheduler.actions import gang_eviction as ge
from koordqueue.scheduler.actions.gang_actions import GangPreemptAction, GangReclaimAction, parse
from koordqueue.scheduler.api import (
    JobInfo,
    NodeInfo,
    PodGroupPhase,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)
from koordqueue.scheduler.framework import open_session, registry
from koordqueue.scheduler.framework.callbacks import (
    GANG_PREEMPT,
    GANG_RECLAIM,
    EvictionContext,
)
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.topology import CLUSTER_TOP

from .harness import build, node, pg, pod, queue, rl, tiers
from .topology import hard, nodes_of, parent_of, with_topology

INQUEUE = PodGroupPhase.INQUEUE
RUNNING = PodGroupPhase.RUNNING
CPU1 = Resources.of({"cpu": "1"})
TEST_EVICT = "test-evict"


class _AllowAll(Plugin):
    """The cases' test plugin: its unified evictable function allows every candidate."""

    name = TEST_EVICT

    def on_session_open(self, session: Session) -> None:
        session.add_unified_evictable_fn(self.name, lambda _ctx, candidates: list(candidates))


@pytest.fixture(autouse=True)
def _allow_all() -> object:
    registry.register_plugin_builder(TEST_EVICT, _AllowAll)
    yield None
    registry.unregister_plugin_builder(TEST_EVICT)


def _task(job: str, name: str, node_name: str, status: TaskStatus, priority: int) -> TaskInfo:
    """testTask(jobID, name, node, status, priority, 1000m)."""
    return TaskInfo(name, name, "ns", job, CPU1, priority=priority, status=status,
                    node_name=node_name or None)  # fmt: skip


def _session(jobs: list[JobInfo], queues: list[QueueInfo], config_text: str = "") -> Session:
    snapshot = with_topology(
        ClusterSnapshot([NodeInfo("n1", Resources.of({"cpu": "8"}))], jobs, queues),
        [nodes_of("d1", 1, "n1")],
    )
    config = parse_config(config_text or f"""
actions: "gangpreempt"
tiers:
- plugins:
  - name: {TEST_EVICT}
""")  # fmt: skip
    return open_session(snapshot, config)


def _job(uid: str, queue_name: str, priority: int, *tasks: TaskInfo, preemptable: bool = True,
         min_available: int = 1) -> JobInfo:  # fmt: skip
    return JobInfo(uid, uid, namespace="ns", queue=queue_name, priority=priority,
                   min_available=min_available, tasks=tasks, preemptable=preemptable,
                   phase=RUNNING)  # fmt: skip


def _preempt_victims(victim_job: JobInfo, allow_whole: bool) -> list[str]:
    preemptor = _job("ns/preemptor", "q1", 100, _task("ns/preemptor", "preemptor", "",
                                                          TaskStatus.PENDING, 100))  # fmt: skip
    session = _session([preemptor, victim_job], [QueueInfo("q1")])
    job = session.jobs["ns/preemptor"]
    pending = ge.pending_for_eviction(session, job)
    bundles = GangPreemptAction()._bundles(session, job, ge.init_requests(pending), "d1",
                                            allow_whole)  # fmt: skip
    return [t.name for t in ge.flatten(bundles)]


def test_gangpreempt_respects_allow_whole_bundle() -> None:
    """gangpreempt TestSelectDomainVictims_RespectAllowWholeBundle: the victim job's one
    running task is a whole bundle (minAvailable 1): none without allowWholeBundle, itself
    with it."""
    victim = _job("ns/victim", "q1", 10, _task("ns/victim", "victim", "n1", TaskStatus.RUNNING, 10))
    assert _preempt_victims(victim, allow_whole=False) == []
    assert _preempt_victims(victim, allow_whole=True) == ["victim"]


def test_gangpreempt_respects_the_victim_job_preemptable() -> None:
    """gangpreempt TestSelectDomainVictims_RespectVictimJobPreemptable: a PodGroup with
    volcano.sh/preemptable false gives no victim."""
    victim = _job("ns/victim", "q1", 10, _task("ns/victim", "victim", "n1", TaskStatus.RUNNING, 10),
                  preemptable=False)  # fmt: skip
    assert _preempt_victims(victim, allow_whole=True) == []


def test_gangpreempt_allows_a_victim_job_without_the_key() -> None:
    """gangpreempt TestSelectDomainVictims_AllowVictimJobWhenPreemptableUnset: a PodGroup
    without the key is preemptable (the kube adapter reads it so: tests/unit/kube)."""
    victim = _job("ns/victim", "q1", 10, _task("ns/victim", "victim", "n1", TaskStatus.RUNNING, 10))
    assert _preempt_victims(victim, allow_whole=True) == ["victim"]


def _reclaim_victims(*victims: JobInfo) -> list[str]:
    reclaimer = _job("ns/reclaimer", "q1", 100,
                     _task("ns/reclaimer", "reclaimer", "", TaskStatus.PENDING, 100))  # fmt: skip
    queues = [QueueInfo("q1"), QueueInfo("q2", reclaimable=True),
              QueueInfo("q3", reclaimable=False)]  # fmt: skip
    session = _session([reclaimer, *victims], queues)
    job = session.jobs["ns/reclaimer"]
    pending = ge.pending_for_eviction(session, job)
    bundles = GangReclaimAction()._bundles(session, job, ge.init_requests(pending), "d1", True)
    return [t.name for t in ge.flatten(bundles)]


def test_gangreclaim_takes_only_reclaimable_queues() -> None:
    """gangreclaim TestSelectDomainVictims_ReclaimableCrossQueueOnly: of two running tasks
    of other queues, only the reclaimable queue's is a victim."""
    victim = _job("ns/victim", "q2", 10, _task("ns/victim", "victim", "n1", TaskStatus.RUNNING, 10))
    other = _job("ns/other", "q3", 10, _task("ns/other", "other", "n1", TaskStatus.RUNNING, 10))
    assert _reclaim_victims(victim, other) == ["victim"]


def test_gangreclaim_respects_the_victim_job_preemptable() -> None:
    """gangreclaim TestSelectDomainVictims_RespectVictimJobPreemptable."""
    victim = _job("ns/victim", "q2", 10, _task("ns/victim", "victim", "n1", TaskStatus.RUNNING, 10),
                  preemptable=False)  # fmt: skip
    assert _reclaim_victims(victim) == []


def test_gangreclaim_allows_a_victim_job_without_the_key() -> None:
    """gangreclaim TestSelectDomainVictims_AllowVictimJobWhenPreemptableUnset."""
    victim = _job("ns/victim", "q2", 10, _task("ns/victim", "victim", "n1", TaskStatus.RUNNING, 10))
    assert _reclaim_victims(victim) == ["victim"]


@pytest.mark.parametrize("action", ["gangpreempt", "gangreclaim"])
def test_parse_arguments(action: str) -> None:
    """TestParseArguments (both actions): maxDomains and allowWholeBundle from the action's
    `configurations:` entry."""
    session = _session([], [QueueInfo("q1")], f"""
actions: "{action}"
configurations:
- name: {action}
  arguments: {{maxDomains: 3, allowWholeBundle: false}}
tiers: []
""")  # fmt: skip
    assert parse(session, action) == (3, False)


@pytest.mark.parametrize("action", ["gangpreempt", "gangreclaim"])
@pytest.mark.parametrize("value", [0, -1], ids=["zero", "negative"])
def test_parse_arguments_invalid_max_domains(action: str, value: int) -> None:
    """TestParseArguments_InvalidMaxDomainsFallsBackToDefault (both actions)."""
    session = _session([], [QueueInfo("q1")], f"""
actions: "{action}"
configurations:
- name: {action}
  arguments: {{maxDomains: {value}}}
tiers: []
""")  # fmt: skip
    assert parse(session, action) == (8, True)


@pytest.mark.parametrize("module", ["gangpreempt", "gangreclaim"])
def test_pick_domains_max_and_dedup(module: str) -> None:
    """TestPickDomainsFromGradients_MaxDomainsAndDedup (both actions' files)."""
    assert ge.pick_domains([["d1", "d2"], ["d2", "d3"]], 2, "") == ["d1", "d2"]


@pytest.mark.parametrize("module", ["gangpreempt", "gangreclaim"])
def test_pick_domains_fallback(module: str) -> None:
    """TestPickDomainsFromGradients_Fallback (both actions' files)."""
    assert ge.pick_domains([], 8, CLUSTER_TOP) == [CLUSTER_TOP]


# --- bundle_test.go ------------------------------------------------------------------------


def _running_job(min_available: int, count: int, role_min: dict[str, int] | None = None
                 ) -> tuple[JobInfo, list[TaskInfo]]:  # fmt: skip
    tasks = [TaskInfo(chr(ord("a") + i), chr(ord("a") + i), role="worker", resreq=CPU1,
                      priority=i, status=TaskStatus.RUNNING) for i in range(count)]  # fmt: skip
    job = JobInfo("j", min_available=min_available, task_min_available=role_min, tasks=tasks)
    return job, tasks


def test_create_job_bundles_safe_and_whole() -> None:
    """TestCreateJobBundles_SafeAndWhole: 5 running workers, minAvailable 3 (and 3 per
    role): the two lowest-priority are safe, three whole."""
    job, local = _running_job(3, 5, {"worker": 3})
    bundles = ge.create_job_bundles(job, local)
    assert [(b.type, len(b.tasks)) for b in bundles] == [
        (ge.BundleType.SAFE, 2), (ge.BundleType.WHOLE, 3)]  # fmt: skip


def test_create_job_bundles_no_role_minimum() -> None:
    """TestCreateJobBundles_NoTaskMinAvailableTreatsAllRolesAsUnconstrained: 4 running,
    minAvailable 2: two safe, two whole."""
    job, local = _running_job(2, 4)
    bundles = ge.create_job_bundles(job, local)
    assert [(b.type, len(b.tasks)) for b in bundles] == [
        (ge.BundleType.SAFE, 2), (ge.BundleType.WHOLE, 2)]  # fmt: skip


def test_create_job_bundles_not_ready_job_is_all_safe() -> None:
    """TestCreateJobBundles_JobNotReadyShortCircuitsAllSafe (its sub-job left out: the
    short cut comes first): 2 running, minAvailable 10: all safe."""
    job, local = _running_job(10, 2)
    bundles = ge.create_job_bundles(job, local)
    assert [(b.type, len(b.tasks)) for b in bundles] == [(ge.BundleType.SAFE, 2)]


def _bundle(kind: ge.BundleType, job: JobInfo, uid: str, local: int, global_: int) -> ge.Bundle:
    task = TaskInfo(uid, uid, resreq=Resources.of({"cpu": str(local)}))
    return ge.Bundle(kind, job, [task], Resources.of({"cpu": str(local)}),
                     Resources.of({"cpu": str(global_)}) if global_ else Resources())  # fmt: skip


def test_apply_allowed_whole_atomic_and_safe_shrinks() -> None:
    """TestApplyAllowedTasks_WholeAtomicAndSafeShrink."""
    job = JobInfo("j")
    t1, t2, t3 = (TaskInfo(u, u, resreq=CPU1) for u in ("t1", "t2", "t3"))
    bundles = [ge.Bundle(ge.BundleType.SAFE, job, [t1, t2], ge.requests([t1, t2])),
               ge.Bundle(ge.BundleType.WHOLE, job, [t3], ge.requests([t3]),
                         ge.requests([t1, t2, t3]))]  # fmt: skip
    valid = ge.apply_allowed(bundles, {"t1", "t3x"})
    assert [(b.type, [t.uid for t in b.tasks]) for b in valid] == [(ge.BundleType.SAFE, ["t1"])]


def test_select_bundles_respects_allow_whole() -> None:
    """TestSelectBundles_RespectsAllowWhole."""
    job = JobInfo("j")
    safe = _bundle(ge.BundleType.SAFE, job, "t1", 1, 0)
    whole = _bundle(ge.BundleType.WHOLE, job, "t2", 2, 0)
    need = Resources.of({"cpu": "1500m"})
    assert [b.type for b in ge.select_bundles([safe, whole], need, False)] == [ge.BundleType.SAFE]
    assert len(ge.select_bundles([safe, whole], need, True)) == 2


def test_sort_bundles_for_preempt_type_then_roi() -> None:
    """TestSortBundlesForPreempt_TypePriorityAndROI: safe first, then the whole bundle with
    the better return (1 of 2 cpus over 1 of 4)."""
    low, high = JobInfo("low", priority=1), JobInfo("high", priority=10)
    safe = _bundle(ge.BundleType.SAFE, high, "s1", 1, 0)
    low_roi = _bundle(ge.BundleType.WHOLE, low, "w1", 1, 4)
    high_roi = _bundle(ge.BundleType.WHOLE, low, "w2", 1, 2)
    bundles = [low_roi, safe, high_roi]
    ge.sort_bundles(bundles, CPU1, lambda a, b: a.job.priority < b.job.priority)
    assert [b.tasks[0].uid for b in bundles] == ["s1", "w2", "w1"]


def test_sort_bundles_for_reclaim_queue_order_then_roi() -> None:
    """TestSortBundlesForReclaim_UsesQueueOrderThenROI: queue order first (qa before qb,
    whatever the return); without one, the better return first."""
    a = _bundle(ge.BundleType.WHOLE, JobInfo("ja", queue="qa"), "a", 1, 4)
    b = _bundle(ge.BundleType.WHOLE, JobInfo("jb", queue="qb"), "b", 1, 2)
    bundles = [b, a]
    ge.sort_bundles(bundles, CPU1, lambda x, y: x.job.queue < y.job.queue)
    assert bundles[0].tasks[0].uid == "a"
    c = _bundle(ge.BundleType.WHOLE, JobInfo("jc", queue="qc"), "c", 1, 4)
    d = _bundle(ge.BundleType.WHOLE, JobInfo("jd", queue="qd"), "d", 1, 2)
    bundles = [c, d]
    ge.sort_bundles(bundles, CPU1, None)
    assert bundles[0].tasks[0].uid == "d"


def test_sort_bundles_for_preempt_victim_job_order() -> None:
    """TestSortBundlesForPreempt_UsesVictimJobOrder."""
    a = _bundle(ge.BundleType.WHOLE, JobInfo("ja"), "a", 1, 2)
    b = _bundle(ge.BundleType.WHOLE, JobInfo("jb"), "b", 1, 2)
    bundles = [a, b]
    ge.sort_bundles(bundles, CPU1, lambda x, y: x.job.uid > y.job.uid)
    assert bundles[0].tasks[0].uid == "b"


def test_sort_bundles_for_reclaim_deterministic_tie_break() -> None:
    """TestSortBundlesForReclaim_DeterministicTieBreaker: by job uid."""
    a = _bundle(ge.BundleType.WHOLE, JobInfo("ja", queue="q"), "a", 1, 2)
    b = _bundle(ge.BundleType.WHOLE, JobInfo("jb", queue="q"), "b", 1, 2)
    bundles = [b, a]
    ge.sort_bundles(bundles, CPU1, None)
    assert [x.tasks[0].uid for x in bundles] == ["a", "b"]


# --- util_test.go / simulate_test.go ---------------------------------------------------------


def _gradient_session(topology_hard: bool) -> tuple[Session, JobInfo]:
    """A session whose only gradient plugin answers no HyperNode (util_test's test plugin:
    network-topology-aware's gradients with no HyperNode a tier-0 job may use)."""
    pods = [pod("p1", "", False, rl("1", "1G"), "pg1")]
    snapshot = build([node("n1", rl("4", "4G"))], pods, [pg("pg1", "q1", 1, INQUEUE)],
                     [queue("q1")])  # fmt: skip
    snapshot = with_topology(snapshot, [], {"pg1": hard(0)} if topology_hard else None)
    session = open_session(snapshot, tiers(("network-topology-aware", {"HyperNodeGradient"})))
    return session, session.jobs["ns1/pg1"]


def test_candidate_domains_empty_gradient_hard_job_has_none() -> None:
    """TestGetCandidateDomains_EmptyGradient_HardTopologyNoFallback."""
    session, job = _gradient_session(True)
    assert session.hypernode_gradients(job, CLUSTER_TOP, "evict") == []
    assert ge.candidate_domains(session, job, 8, hard=True) == []


def test_candidate_domains_empty_gradient_other_job_falls_back_to_the_top() -> None:
    """TestGetCandidateDomains_EmptyGradient_NonHardTopologyFallbackToRoot: the domain of a
    job without a hard topology is the cluster top (Volcano's test plugin answers no
    gradient, so the fallback gives it; network-topology-aware answers the top itself for
    such a job: both ways, the top)."""
    session, job = _gradient_session(False)
    assert ge.pick_domains([], 8, CLUSTER_TOP) == [CLUSTER_TOP]
    assert ge.candidate_domains(session, job, 8, hard=False) == [CLUSTER_TOP]


def _plan_session(node_cpu: str, victim_on_node: bool, domain_nodes: list[str]
                  ) -> tuple[Session, JobInfo, list[TaskInfo]]:  # fmt: skip
    """A 1-cpu pending task, n1 (`node_cpu`, with a 1-cpu victim when asked) and a full
    1-cpu ghost-node; the domain sim-domain holds `domain_nodes`."""
    pods = [pod("t1", "", False, rl("1"), "job"), pod("filler", "ghost-node", True, rl("1"),
                                                      "other")]  # fmt: skip
    groups = [pg("job", "q1", 1, INQUEUE), pg("other", "q1", 1, RUNNING)]
    if victim_on_node:
        pods.append(pod("v1", "n1", True, rl("1"), "victim"))
        groups.append(pg("victim", "q1", 1, RUNNING))
    nodes = [node("n1", rl(node_cpu)), node("ghost-node", rl("1"))]
    snapshot = build(nodes, pods, groups, [queue("q1")])
    snapshot = with_topology(snapshot, [nodes_of("sim-domain", 1, *domain_nodes)])
    session = open_session(snapshot, tiers(("gang", {"JobPipelined"})))
    victims = list(session.jobs["ns1/victim"].tasks.values()) if victim_on_node else []
    return session, session.jobs["ns1/job"], victims


def test_nomination_plan_success() -> None:
    """simulate_test TestBuildNominationPlanInDomain_Success: one pipeline."""
    session, job, _ = _plan_session("2", False, ["n1"])
    plan = ge.nomination_plan(session, queue=None, job=job, domain="sim-domain", victims=[],
                              reason="test")  # fmt: skip
    assert plan is not None and [op.kind.value for op in plan] == ["pipeline"]


def test_nomination_plan_with_a_victim_evicts_and_pipelines() -> None:
    """TestBuildNominationPlanInDomain_WithVictimIncludesEvictAndPipeline: two operations."""
    session, job, victims = _plan_session("1", True, ["n1"])
    plan = ge.nomination_plan(session, queue=None, job=job, domain="sim-domain",
                              victims=victims, reason="test")  # fmt: skip
    assert plan is not None and [op.kind.value for op in plan] == ["evict", "pipeline"]


def test_nomination_plan_no_feasible_node() -> None:
    """TestBuildNominationPlanInDomain_NoFeasibleNode: a node with no room: no plan."""
    session, job, _ = _plan_session("0", False, ["n1"])
    assert ge.nomination_plan(session, queue=None, job=job, domain="sim-domain", victims=[],
                              reason="test") is None  # fmt: skip


def test_nomination_plan_failure_rolls_back_the_eviction() -> None:
    """TestBuildNominationPlanInDomain_PipelineFailureRollsBackEviction: the victim is on n1,
    the domain holds only ghost-node, which the task does not fit (a full node here: Volcano
    uses a node the session does not know); no plan, and the dry run's eviction is undone:
    the victim still running on n1, the task pending."""
    session, job, victims = _plan_session("1", True, ["ghost-node"])
    plan = ge.nomination_plan(session, queue=None, job=job, domain="sim-domain",
                              victims=victims, reason="test")  # fmt: skip
    assert plan is None
    victim = session.jobs["ns1/victim"].tasks[victims[0].uid]
    assert victim.status is TaskStatus.RUNNING and victim.node_name == "n1"
    assert session.nodes["n1"].future_idle.get_nanos("cpu") == 0
    task = next(iter(job.tasks.values()))
    assert task.status is TaskStatus.PENDING and task.node_name is None


def test_nomination_plan_prefers_an_idle_node_over_future_idle() -> None:
    """TestBuildNominationPlanInDomain_PrefersIdleNodeOverFutureIdle: n-future has 2 cpu
    releasing, n-idle 2 cpu idle: the task is pipelined onto n-idle."""
    pods = [pod("t1", "", False, rl("1"), "job"), pod("r1", "n-future", True, rl("2"), "gone")]
    groups = [pg("job", "q1", 1, INQUEUE), pg("gone", "q1", 1, RUNNING)]
    snapshot = build([node("n-future", rl("2")), node("n-idle", rl("2"))], pods, groups,
                     [queue("q1")])  # fmt: skip
    for job in snapshot.jobs:
        for task in list(job.tasks.values()):
            if task.name == "r1":
                job.update_task_status(task, TaskStatus.RELEASING)
    snapshot = with_topology(snapshot, [nodes_of("sim-domain", 1, "n-future", "n-idle")])
    session = open_session(snapshot, tiers(("gang", {"JobPipelined"})))
    plan = ge.nomination_plan(session, queue=None, job=session.jobs["ns1/job"],
                              domain="sim-domain", victims=[], reason="test")  # fmt: skip
    assert plan is not None and [op.node for op in plan] == ["n-idle"]


@pytest.mark.parametrize(("idle_cpu", "expected"), [("2", ("n-idle", False)),
                                                     ("0", ("n-future", True))])
def test_pick_best_node_idle_group_first(idle_cpu: str, expected: tuple[str, bool]) -> None:
    """TestPickBestNodeForTask_PrefersIdleGroup / _FallsBackFutureIdleGroup: the session's
    node choice takes idle room first, else future idle (pipelined)."""
    pods = [pod("t1", "", False, rl("1"), "job"), pod("r1", "n-future", True, rl("3"), "gone")]
    groups = [pg("job", "q1", 1, INQUEUE), pg("gone", "q1", 1, RUNNING)]
    snapshot = build([node("n-future", rl("3")), node("n-idle", rl(idle_cpu))], pods, groups,
                     [queue("q1")])  # fmt: skip
    for job in snapshot.jobs:
        for task in list(job.tasks.values()):
            if task.name == "r1":
                job.update_task_status(task, TaskStatus.RELEASING)
    session = open_session(snapshot, tiers(("gang", {"JobPipelined"})))
    task = next(iter(session.jobs["ns1/job"].tasks.values()))
    chosen = session.select_node(task)
    assert isinstance(chosen, tuple) and (chosen[0].name, chosen[1]) == expected


def test_unified_evictable_gang_reclaim_permits_all() -> None:
    """priority_test.go TestUnifiedEvictableFn_GangReclaimPermitsAll: for gangreclaim,
    priority allows every candidate whatever its priority; for gangpreempt only those of a
    lower job priority than the evicting job's (500: the low one)."""
    pods = [pod("high-task", "node1", True, rl("1", "1G"), "pg-high", namespace="ns1"),
            pod("low-task", "node1", True, rl("1", "1G"), "pg-low", namespace="ns2")]  # fmt: skip
    groups = [pg("pg-high", "q1", 1, RUNNING, priority=1000, namespace="ns1"),
              pg("pg-low", "q1", 1, RUNNING, priority=100, namespace="ns2")]  # fmt: skip
    snapshot = build([node("node1", rl("4", "4G"))], pods, groups, [queue("q1")])
    session = open_session(snapshot, tiers(("priority", {"JobOrder", "JobStarving"})))
    candidates = [t for j in session.jobs.values() for t in j.tasks.values()]
    reclaimer = JobInfo("reclaimer", priority=500)
    reclaim = session.unified_evictable(EvictionContext(GANG_RECLAIM, reclaimer, ""), candidates)
    assert sorted(t.name for t in reclaim) == ["high-task", "low-task"]
    preempt = session.unified_evictable(EvictionContext(GANG_PREEMPT, reclaimer, ""), candidates)
    assert [t.name for t in preempt] == ["low-task"]


def test_nomination_plan_tries_only_hypernodes_that_hold_the_pending_requests() -> None:
    """The trial's gradient inside a domain is the sub-job form (simulate.go): a HyperNode
    must hold the pending tasks' requests. Here ten tier-1 zones under the domain, the one
    that holds the 6-cpu task (z0, 8 cpu) first, nine of 4 cpu after; without minResources
    the job form would keep all ten and the eviction cap (8, widest and last first) would
    cut z0 off, leaving no plan."""
    nodes = [node("n0", rl("8")), *(node(f"n{i}", rl("4")) for i in range(1, 10))]
    snapshot = build(nodes, [pod("t1", "", False, rl("6"), "job")],
                     [pg("job", "q1", 1, INQUEUE)], [queue("q1")])
    zones = [nodes_of(f"z{i}", 1, f"n{i}") for i in range(10)]
    snapshot = with_topology(snapshot, [*zones, parent_of("dom", 2, *(z.name for z in zones))],
                             {"job": hard(1)})
    session = open_session(snapshot, tiers(("gang", {"JobPipelined"}),
                                           ("network-topology-aware", {"HyperNodeGradient"})))
    job = session.jobs["ns1/job"]
    plan = ge.nomination_plan(session, queue=None, job=job, domain="dom", victims=[],
                              reason="test")  # fmt: skip
    assert plan is not None and [(op.kind.value, op.node) for op in plan] == [("pipeline", "n0")]
