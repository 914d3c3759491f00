"""task-topology plugin: cases of volcano-sh/volcano
pkg/scheduler/plugins/task-topology/topology_test.go (Test_readTopologyFromPgAnnotations, the
package's only test function), then the plugin in a session: buckets, task order and the
node score placing a ps/worker job.

Switched off and run (`test_each_case_fails_with_task_topology_off`: the annotations read as
absent, or task-topology left out of the configuration): every parse case but "nil
annotation" (which expects nothing read, and holds either way, as Volcano wrote it) and both
session cases fail; checked.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import pytest

from koordqueue.scheduler.api import JobInfo, PodGroupPhase, TaskInfo
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.interface import Arguments
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.plugins.task_topology import (
    TaskTopology,
    TaskTopologyPlugin,
    TopologyError,
    read_topology,
)

from .harness import build, node, pg, pod, queue, rl, run, tiers

AFF, ANTI, ORDER = (vn.TASK_TOPOLOGY_AFFINITY, vn.TASK_TOPOLOGY_ANTI_AFFINITY,
                    vn.TASK_TOPOLOGY_TASK_ORDER)
_off = False
SIX = ("ps", "ps", "worker", "worker", "chief", "evaluator")


def _job(roles: Sequence[str], annotations: Mapping[str, str] | None) -> JobInfo:
    tasks = [TaskInfo(f"t{i}", f"job1-{role}-{i}", role=role) for i, role in enumerate(roles)]
    return JobInfo("default/job1", "job1", namespace="default", tasks=tasks,
                   annotations=annotations)


def _read(job: JobInfo) -> TaskTopology | str | None:
    if _off:
        return None
    try:
        return read_topology(job)
    except TopologyError as exc:
        return str(exc)


DASHED = ("ps-some", "ps-some", "worker-another-some", "worker-another-some", "chief-kk",
          "evaluator-tt")
PARSE_CASES: dict[str, tuple[Sequence[str], Mapping[str, str] | None,
                             TaskTopology | str | None]] = {
    "correct annotation": (
        SIX, {AFF: "ps,worker;ps,chief", ANTI: "ps;worker,chief",
              ORDER: "ps,worker,chief,evaluator"},
        TaskTopology([["ps", "worker"], ["ps", "chief"]], [["ps"], ["worker", "chief"]],
                     ["ps", "worker", "chief", "evaluator"])),
    "correct annotation with tasks whose names contain `-`": (
        DASHED, {AFF: "ps-some,worker-another-some;ps-some,chief-kk",
                 ANTI: "ps-some;worker-another-some,chief-kk",
                 ORDER: "ps-some,worker-another-some,chief-kk,evaluator-tt"},
        TaskTopology([["ps-some", "worker-another-some"], ["ps-some", "chief-kk"]],
                     [["ps-some"], ["worker-another-some", "chief-kk"]],
                     ["ps-some", "worker-another-some", "chief-kk", "evaluator-tt"])),
    "nil annotation": ((), None, None),
    "invalid annotation": (
        SIX, {AFF: "$%GF$^trtqwrg^", ANTI: "ps;worker,chief;#@FGEW^vfa897bgs;;",
              ORDER: "ps,worker,chief,evaluator,,,"},
        "task $%GF$^trtqwrg^ do not exist in job <default/job1>"),
    "invalid task name": (
        SIX[:4], {AFF: "ps,worker", ANTI: "ps", ORDER: "ps,worker,chief"},
        "task chief do not exist in job <default/job1>"),
    "duplicate task name": (
        SIX[:4], {AFF: "ps,worker", ANTI: "ps,ps", ORDER: "ps,worker"},
        "task ps is duplicate in job <default/job1>"),
    "redundant punctuations": (
        SIX, {AFF: "ps,worker;ps,,chief,;", ANTI: "ps;worker,chief;;;",
              ORDER: "ps,worker,chief,evaluator,,,"},
        TaskTopology([["ps", "worker"], ["ps", "", "chief", ""], [""]],
                     [["ps"], ["worker", "chief"], [""], [""], [""]],
                     ["ps", "worker", "chief", "evaluator", "", "", ""])),
}


@pytest.mark.parametrize("name", list(PARSE_CASES))
def test_read_topology_from_pg_annotations(name: str) -> None:
    """Test_readTopologyFromPgAnnotations: the three annotations split by ";" and ",",
    checked against the job's task names (the error names the first bad one)."""
    roles, annotations, expected = PARSE_CASES[name]
    assert _read(_job(roles, annotations)) == expected


# --- the plugin in a session ---------------------------------------------------------------------
def _ps_workers() -> tuple[dict[str, str], list[str]]:
    """Two nodes of 4 cpu; a job of ps-0 and worker-0/1 (1 cpu each) with affinity
    "ps,worker" and anti-affinity "worker". Buckets: {worker-0, ps-0} and {worker-1}.
    Returns the binds and the job's task order."""
    one = rl("1", "1G")
    snapshot = build(
        [node("n1", rl("4", "4G", {"pods": "10"})), node("n2", rl("4", "4G", {"pods": "10"}))],
        [pod("ps-0", "", False, one, "job", role="ps"),
         pod("worker-0", "", False, one, "job", role="worker"),
         pod("worker-1", "", False, one, "job", role="worker")],
        [pg("job", "q", 1, PodGroupPhase.INQUEUE)], [queue("q")])
    for job in snapshot.jobs:
        job.annotations = {AFF: "ps,worker", ANTI: "worker"}
    plugins = [("predicates", {"Predicate"})]
    plugins += [] if _off else [(vn.TASK_TOPOLOGY, {"TaskOrder", "NodeOrder"})]
    config = tiers(*plugins)
    session = open_session(snapshot, config)
    tasks = list(session.jobs["ns1/job"].tasks.values())
    key = session.task_order_key()
    ordered = sorted(tasks, key=key) if key is not None else _sorted(session, tasks)
    return run(snapshot, config, "allocate").binds, [t.name for t in ordered]


def _sorted(session: Session, tasks: list[TaskInfo]) -> list[TaskInfo]:
    """The tasks in the session's task order (task-topology gives no sort key)."""
    less = session.task_order_less
    return sorted(tasks, key=functools.cmp_to_key(
        lambda a, b: -1 if less(a, b) else (1 if less(b, a) else 0)))


def test_workers_apart_and_ps_with_a_worker() -> None:
    """Task order: the bigger bucket first, in it the self anti-affine worker before ps;
    the node score then puts ps beside worker-0 and worker-1 on the other node (without
    task-topology every pod ties and all three go to n1)."""
    binds, order = _ps_workers()
    assert order == ["worker-0", "ps-0", "worker-1"]
    assert binds == {"ns1/worker-0": "n1", "ns1/ps-0": "n1", "ns1/worker-1": "n2"}


def test_weight_argument() -> None:
    """`task-topology.weight` (1 by default) multiplies the node score."""
    assert TaskTopologyPlugin().weight == 1
    assert TaskTopologyPlugin(Arguments({vn.TASK_TOPOLOGY_WEIGHT: 10})).weight == 10


def test_each_case_fails_with_task_topology_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__name__ + "._off", True)
    for name, (roles, notes, expected) in PARSE_CASES.items():
        if name != "nil annotation":
            assert _read(_job(roles, notes)) != expected, name
    binds, order = _ps_workers()
    assert order != ["worker-0", "ps-0", "worker-1"]
    assert binds != {"ns1/worker-0": "n1", "ns1/ps-0": "n1", "ns1/worker-1": "n2"}
