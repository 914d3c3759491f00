"""Our filters against kube-scheduler's, over the committed corpus (issue 14, part 4).

The corpus (tests/equivalence/corpus/, made by tests/equivalence/generate_corpus.py on a real
control plane with kube-scheduler v1.37.2) holds random small snapshots and, for each probe
pod and node, whether kube-scheduler's filters accept the node. Here the same objects go
through koordqueue/kube/scheduler/convert.py into a snapshot, and the session answers with
the path allocate takes: the pre-predicates, then the placement engine's feasible nodes
(predicates plugin filters, inter-pod affinity, topology spread, resource fit on idle).

Required (the issue): every node we accept, kube-scheduler accepts. Expected as well: the same
set, except the probes listed in corpus/differences.json with the documented reason and the
set we accept instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler import convert
from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api import QueueInfo, TaskInfo
from koordqueue.scheduler.framework.config import default_config
from koordqueue.scheduler.framework.session import open_session

CORPUS = Path(__file__).resolve().parents[2] / "equivalence" / "corpus"
DIFFERENCES = CORPUS / "differences.json"


def _snapshots() -> list[Path]:
    return sorted(CORPUS.glob("snapshot-*.json"))


@cache
def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _with_uid(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The corpus stores objects as written (no uid): the key stands in for one."""
    out = dict(obj)
    m = dict(out.get("metadata") or {})
    m.setdefault("uid", f"{m.get('namespace', '')}/{m.get('name', '')}")
    out["metadata"] = m
    return out


@cache
def our_accepts(path: Path) -> dict[str, frozenset[str]]:
    """Probe name -> the nodes our core would place it on (each probe alone)."""
    doc = _load(path)
    nodes = [convert.node_info(n) for n in doc["nodes"] if convert.node_ready(n)]
    by_name = {n.name: n for n in nodes}
    for raw in doc["pods"]:
        existing = convert.task_info(_with_uid(raw))
        by_name[existing.node_name or ""].add_task(existing)
    jobs = []
    for probe in doc["probes"]:
        task = convert.task_info(_with_uid(probe["pod"]))
        job = convert.standalone_job(probe["pod"], task)
        job.add_task(task)
        jobs.append(job)
    namespace_labels = {
        ns["metadata"]["name"]: dict(ns["metadata"].get("labels") or {}) for ns in doc["namespaces"]
    }
    snapshot = ClusterSnapshot(nodes, jobs, [QueueInfo("default")], namespace_labels)
    session = open_session(snapshot, default_config())
    out: dict[str, frozenset[str]] = {}
    for job in jobs:
        (task,) = session.jobs[job.uid].tasks.values()
        out[task.name] = _accepted(session, task)
    return out


def _accepted(session: Any, task: TaskInfo) -> frozenset[str]:
    if session.pre_predicate(task) is not None:
        return frozenset()
    idx, _scores = session.placement.candidates(task)
    return frozenset(session.node_list[i].name for i in idx.tolist())


def _differences() -> dict[tuple[str, str], dict[str, Any]]:
    if not DIFFERENCES.exists():
        return {}
    rows = json.loads(DIFFERENCES.read_text())["differences"]
    return {(r["snapshot"], r["probe"]): r for r in rows}


def _cases() -> Iterator[Any]:
    for path in _snapshots():
        for probe in _load(path)["probes"]:
            name = probe["pod"]["metadata"]["name"]
            yield pytest.param(path, name, id=f"{path.stem}-{name}")


def _theirs(path: Path, probe: str) -> frozenset[str]:
    for entry in _load(path)["probes"]:
        if entry["pod"]["metadata"]["name"] == probe:
            accepts = entry["kube_scheduler"]["accepts"]
            return frozenset(n for n, ok in accepts.items() if ok)
    raise KeyError(probe)


def test_the_corpus_is_there_and_large_enough() -> None:
    probes = sum(len(_load(p)["probes"]) for p in _snapshots())
    assert probes >= 60, f"only {probes} probes in {CORPUS}"
    versions = {_load(p)["kube_scheduler"] for p in _snapshots()}
    assert versions == {"v1.37.2"}


@pytest.mark.parametrize(("path", "probe"), list(_cases()))
def test_every_node_we_accept_kube_scheduler_accepts(path: Path, probe: str) -> None:
    ours, theirs = our_accepts(path)[probe], _theirs(path, probe)
    assert ours <= theirs, f"we accept {sorted(ours - theirs)}, kube-scheduler does not"


@pytest.mark.parametrize(("path", "probe"), list(_cases()))
def test_we_accept_the_same_nodes_as_kube_scheduler(path: Path, probe: str) -> None:
    ours, theirs = our_accepts(path)[probe], _theirs(path, probe)
    known = _differences().get((path.stem, probe))
    if known is not None:
        assert theirs == frozenset(known["kube_scheduler"]), "the corpus changed under the note"
        assert ours == frozenset(known["ours"]), known["reason"]
        assert ours != theirs, f"no longer a difference: drop the note ({known['reason']})"
        return
    assert ours == theirs, (
        f"ours {sorted(ours)} != kube-scheduler's {sorted(theirs)}; "
        f"kube-scheduler said: {_load(path)['probes'][int(probe[1:])]['kube_scheduler']}"
    )


def _pod(affinity: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "p", "namespace": "default", "uid": "p"}
    return {"metadata": meta, "spec": {"containers": [], "affinity": {"nodeAffinity": affinity}}}


def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    ready = [{"type": "Ready", "status": "True"}]
    alloc = {"cpu": "4", "memory": "4Gi", "pods": "10"}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": alloc, "conditions": ready},
    }


@pytest.mark.parametrize(
    ("term", "accepted"),
    [
        ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}, {"b"}),
        (
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["b"]}]},
            {"a", "c"},
        ),
        (
            {
                "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}],
                "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}],
            },
            {"c"},
        ),
    ],
)
def test_match_fields_select_nodes_by_name_anded_with_the_expressions(
    term: dict[str, Any], accepted: set[str]
) -> None:
    """kube-scheduler's NodeAffinity reads matchFields (metadata.name) too; a term with only
    fields used to read as empty (no node) and fields beside expressions were ignored."""
    nodes = [
        convert.node_info(_node("a", {"disk": "ssd"})),
        convert.node_info(_node("b", {"disk": "hdd"})),
        convert.node_info(_node("c", {"disk": "ssd"})),
    ]
    pod = _pod({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}})
    task = convert.task_info(pod)
    job = convert.standalone_job(pod, task)
    job.add_task(task)
    session = open_session(ClusterSnapshot(nodes, [job], [QueueInfo("default")]), default_config())
    (mine,) = session.jobs[job.uid].tasks.values()
    assert _accepted(session, mine) == accepted
