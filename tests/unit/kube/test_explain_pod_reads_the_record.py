"""explain pod/NAME reads the session's record, and says what the scheduler writes on the pod.

For random clusters (nodes of a few sizes, labels and a cordon; queues with and without
capability; PodGroups with minMember, some missing; pods of many sizes, some best-effort, some
with a selector, some already running), every pending pod is explained, then the real
`Scheduler` runs one round on the same cache. For each pod the explanation's verdict must be
the one the round's skip record (or its binds) calls for, by the table below, and its message
exactly the PodScheduled condition and the FailedScheduling event the scheduler wrote.

Fails on explain before issue 25.2 / 33.9 (it re-derived the chain in its own order: a pod
larger than every node was "Unschedulable" with "0/N nodes are available ..." while the
scheduler wrote the gang's "not ready" message, its queue having refused the pod first).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from koordqueue.kube.api import EVENT, Kind
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.scheduler.explain_pod import PodVerdict, explain_pod
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import ControllerSettings
from koordqueue.scheduler import default_config
from koordqueue.scheduler.framework.skips import Skip, TaskSkip
from tests.unit.cli.test_explain_pod import cache_of, node, pod, pod_group, queue


class RecordingApi:
    """Takes every write the scheduler sends; answers reads with nothing special."""

    def __init__(self) -> None:
        self.conditions: dict[str, str] = {}
        self.group_status: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[str, str, str]] = []
        self.repeats = 0
        """Events said again: the recorder's count bumps on an Event already written."""

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        if method == "PATCH" and path.endswith("/status"):
            name = path.split("/")[-2]
            for cond in body["status"]["conditions"]:
                self.conditions[name] = cond["message"]
        return {}

    def merge_patch(self, kind: Kind, name: str, patch: dict[str, Any], *_: Any,
                    **__: Any) -> Any:
        if kind == EVENT:
            self.repeats += 1
        elif "status" in patch:
            self.group_status[name] = patch["status"]
        return {}

    def create(self, kind: Kind, body: dict[str, Any], namespace: str | None = None) -> Any:
        if kind == EVENT:
            ref = body["involvedObject"]
            self.events.append((ref["name"], body["reason"], body["message"]))
        return {"metadata": {"name": "e"}}

    def get(self, *_: Any, **__: Any) -> Any:
        return {"metadata": {"name": "default"}}


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    nodes = [
        node(f"n{i}", draw(st.sampled_from(["1", "2", "4", "8"])),
             labels={"zone": draw(st.sampled_from(["a", "b"]))},
             cordoned=draw(st.booleans()) and draw(st.booleans()))
        for i in range(draw(st.integers(0, 3)))
    ]
    capability = draw(st.sampled_from([None, None, {"cpu": "2"}, {"cpu": "3"}]))
    groups = [pod_group(f"g{i}", draw(st.integers(1, 3))) for i in range(2)]
    if draw(st.booleans()):  # enqueue admits it only if its queue can take this much
        groups[1]["spec"]["minResources"] = {"cpu": draw(st.sampled_from(["1", "20"]))}
    pods = []
    for i in range(draw(st.integers(1, 7))):
        cpu = draw(st.sampled_from(["0", "1", "1", "2", "3", "16"]))
        group = draw(st.sampled_from([None, None, "g0", "g1", "g1", "missing"]))
        selector = {"zone": "a"} if draw(st.integers(0, 4)) == 0 else None
        placed = draw(st.integers(0, 3)) == 0 and nodes
        p = pod(f"p{i}", cpu, group=group, selector=selector,
                node_name=nodes[0]["metadata"]["name"] if placed else None,
                phase="Running" if placed else "Pending")
        if cpu == "0":
            p["spec"]["containers"][0]["resources"] = {}
        pods.append(p)
    return {"nodes": nodes, "pods": pods, "groups": groups,
            "queues": [queue(capability=capability)]}


def expected(entry: TaskSkip | None) -> PodVerdict:
    """The verdict for a recorded rule (SPEC 3.4's wording, not explain's code)."""
    if entry is None:
        return PodVerdict.UNKNOWN
    if entry.kind in (Skip.QUEUE_FULL, Skip.QUEUE_OVERUSED) and entry.errors is not None:
        return PodVerdict.UNSCHEDULABLE  # no node could take it either: that is the cause
    return {
        Skip.NOT_ENQUEUED: PodVerdict.NOT_ENQUEUED,
        Skip.JOB_INVALID: PodVerdict.JOB_INVALID,
        Skip.BEST_EFFORT: PodVerdict.BEST_EFFORT,
        Skip.QUEUE_OVERUSED: PodVerdict.QUEUE_OVERUSED,
        Skip.QUEUE_FULL: PodVerdict.QUEUE_REFUSED,
        Skip.PRE_PREDICATE: PodVerdict.PRE_PREDICATE,
        Skip.NO_NODE: PodVerdict.UNSCHEDULABLE,
        Skip.GANG_NOT_READY: PodVerdict.GANG_NOT_READY,
        Skip.GANG_GAVE_UP: PodVerdict.GANG_NOT_READY,
    }[entry.kind]


def best_effort_gang_kept_by_backfill() -> dict[str, Any]:
    """CI on 5119b54: gang g1 (minMember 2) of two best-effort pods, p0 fitting no node. Backfill
    places p1 and keeps it unbound (the gang is pipelined: p0, pending best-effort, counts, as in
    Volcano's IsPipelined). explain said "reserved on a node whose resources are being released"
    while the record still held allocate's "BestEffort" and the pod got the gang's message."""
    bare = [pod(f"p{i}", "0", group="g1", selector=sel) for i, sel in ((0, {"zone": "a"}),
                                                                        (1, None))]
    for p in bare:
        p["spec"]["containers"][0]["resources"] = {}
    return {"nodes": [node("n0", "1", labels={"zone": "b"}, cordoned=False)], "pods": bare,
            "groups": [pod_group("g0", 1), pod_group("g1", 2)], "queues": [queue(capability=None)]}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
@example(best_effort_gang_kept_by_backfill())
def test_every_pod_explanation_is_the_sessions_record_and_the_pods_condition(
    cluster: dict[str, Any],
) -> None:
    cache = cache_of(cluster["nodes"], cluster["pods"], cluster["groups"], cluster["queues"])
    pending = [p for p in cluster["pods"] if not p["spec"].get("nodeName")]
    explained = {p["metadata"]["name"]: explain_pod(p, cache, default_config())
                 for p in pending}

    api = RecordingApi()
    scheduler = Scheduler(api, ControllerSettings(), cache=cache,  # type: ignore[arg-type]
                          recorder=EventRecorder(api))  # type: ignore[arg-type]
    try:
        outcome = scheduler.run_once()
        scheduler.drain()
    finally:
        scheduler.close()
    result = outcome.result
    bound = {b.task for b in result.binds}
    built = cache.build()
    for p in pending:
        name, uid = p["metadata"]["name"], p["metadata"]["uid"]
        ex = explained[name]
        job = built.pending.get(uid)
        if p["metadata"]["annotations"].get("scheduling.k8s.io/group-name") == "missing":
            assert ex.verdict is PodVerdict.POD_GROUP_NOT_FOUND
            assert name not in api.conditions
            continue
        assert job is not None
        if uid in bound:
            assert ex.verdict is PodVerdict.WOULD_BIND and ex.message is None
            continue
        assert ex.verdict is expected(result.skips.of(uid, job)), (name, ex.summary)
        written = api.conditions.get(name)
        assert ex.message == written == result.pod_cause(uid, job), name
        failed = [m for obj, reason, m in api.events
                  if obj == name and reason == "FailedScheduling"]
        assert failed == ([written] if written else [])
