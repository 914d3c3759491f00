"""What-if for the scheduler core (`koordqueue whatif --nodes`, issue 29 part 3).

One scheduling session on the cluster as the scheduler's cache sees it, and one on the same
snapshot with the edits: a node drained (its pods pending again, as their controllers would
recreate them), N nodes of a shape added, a queue's weight or capability changed. The
difference, per queue: which pending pods would place (and where), which would be evicted by
reclaim or preempt. Sessions are dry: `run_session` returns decisions and writes nothing.

Edit kinds (flag spelling): drain-node NODE; add-nodes N=RES (nodes whatif-node-1..N with
that allocatable, and the labels after a `;`: 2=cpu=8,memory=32Gi;zone=a); queue-weight
QUEUE=W; queue-capability QUEUE=RES.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from koordqueue.scheduler import SchedulerConfig
from koordqueue.scheduler.api import JobInfo, NodeInfo, TaskStatus
from koordqueue.scheduler.framework import ClusterSnapshot, run_session
from koordqueue.scheduler.framework.result import SessionResult
from koordqueue.simulation.whatif import Edit, EditError, parse_resources

NODE_EDIT_KINDS: Final = ("drain-node", "add-nodes", "queue-weight", "queue-capability")
ADDED_NODE: Final = "whatif-node-{i}"
MAX_NODES: Final = 10_000


def parse_node_edit(kind: str, raw: str, text: str | None = None) -> Edit:
    shown = text if text is not None else f"--{kind} {raw}"
    if kind not in NODE_EDIT_KINDS:
        raise EditError(shown, f"unknown edit kind {kind!r} (known: {', '.join(NODE_EDIT_KINDS)})")
    if kind == "drain-node":
        if not raw:
            raise EditError(shown, "needs a node name")
        return Edit(kind, raw, "", shown)
    target, eq, value = raw.partition("=")
    if not eq or not target or not value:
        want = {"add-nodes": "N=cpu=8,memory=32Gi", "queue-weight": "QUEUE=W",
                "queue-capability": "QUEUE=cpu=8"}[kind]
        raise EditError(shown, f"expected {want}, got {raw!r}")
    return Edit(kind, target, value, shown)


def _labels(edit: Edit, text: str) -> dict[str, str]:
    labels = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise EditError(edit.text, f"labels are KEY=VALUE[,...], got {item!r}")
        labels[key] = value
    return labels


def _drained(jobs: Sequence[JobInfo], node: str) -> list[JobInfo]:
    """Jobs with their tasks on `node` pending again (their controller makes new pods)."""
    out = []
    for job in jobs:
        if not any(t.node_name == node for t in job.tasks.values()):
            out.append(job)
            continue
        copy = job.clone()
        for task in list(copy.tasks.values()):
            if task.node_name == node:
                copy.update_task_status(task, TaskStatus.PENDING)
                task.node_name = None
        out.append(copy)
    return out


def apply_node_edits(snapshot: ClusterSnapshot, edits: Sequence[Edit]) -> ClusterSnapshot:
    """The snapshot with every edit applied in order (the original untouched)."""
    nodes = list(snapshot.nodes)
    jobs = list(snapshot.jobs)
    queues = list(snapshot.queues)
    for edit in edits:
        if edit.kind == "drain-node":
            if not any(n.name == edit.target for n in nodes):
                raise EditError(edit.text, f"no node {edit.target!r} in the cluster "
                                           f"(nodes: {', '.join(sorted(n.name for n in nodes))})")
            nodes = [n for n in nodes if n.name != edit.target]
            jobs = _drained(jobs, edit.target)
        elif edit.kind == "add-nodes":
            try:
                count = int(edit.target)
            except ValueError:
                raise EditError(edit.text, f"N must be an integer, got {edit.target!r}") from None
            if not 1 <= count <= MAX_NODES:
                raise EditError(edit.text, f"N must be 1..{MAX_NODES}, got {count}")
            shape_text, _, labels_text = edit.value.partition(";")
            shape = parse_resources(replace(edit, value=shape_text))
            labels = _labels(edit, labels_text)
            taken = {n.name for n in nodes}
            start = 1
            while ADDED_NODE.format(i=start) in taken:
                start += 1
            nodes += [NodeInfo(ADDED_NODE.format(i=i), shape, labels=labels)
                      for i in range(start, start + count)]
        else:
            index = next((i for i, q in enumerate(queues) if q.name == edit.target), None)
            if index is None:
                raise EditError(edit.text, f"no queue {edit.target!r} in the cluster "
                                           f"(queues: {', '.join(sorted(q.name for q in queues))})")
            if edit.kind == "queue-weight":
                weight = int(edit.value) if edit.value.isdigit() else 0
                if weight < 1:
                    raise EditError(edit.text, f"must be an integer >= 1, got {edit.value!r}")
                queues[index] = replace(queues[index], weight=weight)
            else:
                queues[index] = replace(queues[index], capability=parse_resources(edit))
    return plain(replace(snapshot, nodes=nodes, jobs=jobs, queues=queues))


def plain(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The snapshot without a cache's index. A session on an IndexedSnapshot (what the
    scheduler cache builds) takes its nodes and jobs from the index, so edits made to the
    `nodes`/`jobs` lists would be ignored; a plain one is read from the lists (and every
    placed task re-accounted on copies of the nodes)."""
    return ClusterSnapshot(
        nodes=list(snapshot.nodes), jobs=list(snapshot.jobs), queues=list(snapshot.queues),
        namespace_labels=snapshot.namespace_labels, pdbs=snapshot.pdbs,
        hypernodes=snapshot.hypernodes,
    )


@dataclass(frozen=True, slots=True)
class PodChange:
    queue: str
    pod: str
    """namespace/name"""
    before: str
    after: str


@dataclass(slots=True)
class NodeWhatIf:
    edits: tuple[Edit, ...]
    before: SessionResult
    after: SessionResult
    pods: list[PodChange] = field(default_factory=list)

    def by_queue(self) -> dict[str, list[PodChange]]:
        out: dict[str, list[PodChange]] = {}
        for change in self.pods:
            out.setdefault(change.queue, []).append(change)
        return out


PENDING_TEXT: Final = "pending"


def _fates(result: SessionResult, snapshot: ClusterSnapshot) -> dict[str, str]:
    """Task uid -> what the session does with it: bound to a node, evicted (why), pending."""
    fates = {t.uid: PENDING_TEXT if t.node_name is None else f"on {t.node_name}"
             for job in snapshot.jobs for t in job.tasks.values()}
    for bind in result.binds:
        fates[bind.task] = f"placed on {bind.node}"
    for pipelined in result.pipelined:  # (waits for what evictions free on that node)
        fates[pipelined.task] = f"pipelined on {pipelined.node}"
    for eviction in result.evictions:
        fates[eviction.task] = f"evicted by {eviction.reason} (from {eviction.node})"
    return fates


def node_what_if(
    snapshot: ClusterSnapshot, edits: Sequence[Edit], config: SchedulerConfig | None = None
) -> NodeWhatIf:
    """One dry session on `snapshot` and one with `edits`; the pods whose fate differs."""
    proposed = apply_node_edits(snapshot, edits)
    # both worlds read the same way (the lists, not an index), so only the edits differ
    before, after = run_session(plain(snapshot), config), run_session(proposed, config)
    fates_before, fates_after = _fates(before, snapshot), _fates(after, proposed)
    tasks = {t.uid: (job.queue, f"{t.namespace}/{t.name}")
             for jobs in (snapshot.jobs, proposed.jobs) for job in jobs for t in job.tasks.values()}
    changes = []
    for uid in sorted(set(fates_before) | set(fates_after), key=lambda u: tasks[u]):
        b, a = fates_before.get(uid, PENDING_TEXT), fates_after.get(uid, PENDING_TEXT)
        if a != b:
            queue, pod = tasks[uid]
            changes.append(PodChange(queue, pod, b, a))
    return NodeWhatIf(tuple(edits), before, after, changes)
