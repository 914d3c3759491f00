"""PodGroup status writes with either CRD shape (issue 24, part 1).

`Server` answers like the API server does for Volcano's own podgroups CRD (no status
subresource: a PATCH of `/status` is 404, discovery lists no `podgroups/status`) or for ours.
Before the fix the scheduler patched `/status` only and took the 404 for "PodGroup gone":
`test_volcano_shape_gets_its_phase_on_the_object` and
`test_overcommit_enqueue_is_kept_with_volcanos_crd` fail on that code (the phase stays unset),
and nothing was logged (`test_a_404_on_a_cached_podgroup_is_logged_and_written_again`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from koordqueue.kube.api import POD_GROUP, ApiError, Kind
from koordqueue.kube.scheduler import names
from koordqueue.kube.scheduler.podgroup_status import (
    Condition,
    GroupStatus,
    PodGroupStatusWriter,
    StatusWrite,
    merged_conditions,
    served_status,
)
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.scheduler.store import CachedKind
from koordqueue.scheduler import SessionResult
from koordqueue.scheduler.api import JobInfo, PodGroupPhase, TaskInfo
from koordqueue.scheduler.framework.result import PhaseUpdate
from tests.unit.kube.memory_api import MemoryApi

DISCOVERY = "/apis/scheduling.volcano.sh/v1beta1"


class Server(MemoryApi):
    """MemoryApi plus the subresource rule and discovery; records status patches."""

    def __init__(self, status_subresource: bool) -> None:
        super().__init__()
        self.status_subresource = status_subresource
        self.patches: list[tuple[str, str | None]] = []
        self.discovery_calls = 0
        self.requests: list[tuple[str, str]] = []

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        self.requests.append((method, path))
        if method == "GET" and path == DISCOVERY:
            self.discovery_calls += 1
            resources = [{"name": "podgroups"}, {"name": "queues"}, {"name": "queues/status"}]
            if self.status_subresource:
                resources.append({"name": "podgroups/status"})
            return {"kind": "APIResourceList", "resources": resources}
        return {}

    def merge_patch(self, kind: Kind, name: str, patch: Mapping[str, Any],
                    namespace: str | None = None, subresource: str | None = None) -> dict[str, Any]:
        if kind.plural == "podgroups":
            self.patches.append((name, subresource))
            if subresource == "status" and not self.status_subresource:
                raise ApiError(404, "NotFound", "the server could not find the requested resource",
                               "PATCH", kind.path(namespace, name, subresource))
        return super().merge_patch(kind, name, patch, namespace, subresource)


def group(name: str = "pg", phase: str | None = None, **status: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns"}, "spec": {"minMember": 2},
    }
    if phase is not None or status:
        body["status"] = {**({"phase": phase} if phase else {}), **status}
    return body


def job(uid: str, tasks: int = 2, placed: int = 0, phase: PodGroupPhase = PodGroupPhase.PENDING,
        min_available: int = 2) -> JobInfo:
    from koordqueue.scheduler.api import TaskStatus

    out = JobInfo(uid, "pg", namespace="ns", min_available=min_available, phase=phase)
    for i in range(tasks):
        status = TaskStatus.BOUND if i < placed else TaskStatus.PENDING
        out.add_task(TaskInfo(f"{uid}-t{i}", f"t{i}", "ns", status=status,
                              node_name="n1" if i < placed else None))
    return out


def test_discovery_names_the_status_subresource() -> None:
    listing = {"resources": [{"name": "podgroups"}, {"name": "podgroups/status"}]}
    assert served_status(listing, "podgroups")
    assert not served_status({"resources": [{"name": "podgroups"}]}, "podgroups")
    assert served_status({}, "podgroups")  # says nothing of podgroups: our shape


def test_the_shape_is_asked_once() -> None:
    api = Server(status_subresource=False)
    stored = api.create(POD_GROUP, group(), "ns")
    writer = PodGroupStatusWriter(api)  # type: ignore[arg-type]
    status = GroupStatus("Inqueue", None)
    for phase in ("Inqueue", "Running"):
        status = GroupStatus(phase, None)
        assert writer.write(StatusWrite("ns/pg", "ns", "pg", status, stored), still_cached=True)
    assert api.discovery_calls == 1
    assert api.patches == [("pg", None), ("pg", None)]


@pytest.mark.parametrize("subresource", [True, False])
def test_volcano_shape_gets_its_phase_on_the_object(subresource: bool) -> None:
    api = Server(status_subresource=subresource)
    stored = api.create(POD_GROUP, group(), "ns")
    writer = PodGroupStatusWriter(api)  # type: ignore[arg-type]
    write = StatusWrite("ns/pg", "ns", "pg", GroupStatus("Inqueue", None), stored)
    assert writer.write(write, still_cached=True)
    assert api.get(POD_GROUP, "pg", "ns")["status"]["phase"] == "Inqueue"  # type: ignore[index]
    assert api.patches == [("pg", "status" if subresource else None)]


def test_a_stale_shape_is_asked_again_and_the_write_made_at_once() -> None:
    api = Server(status_subresource=True)
    stored = api.create(POD_GROUP, group(), "ns")
    writer = PodGroupStatusWriter(api)  # type: ignore[arg-type]
    assert writer.subresources.has_status(POD_GROUP)
    api.status_subresource = False  # the CRD was replaced by Volcano's own
    write = StatusWrite("ns/pg", "ns", "pg", GroupStatus("Inqueue", None), stored)
    assert writer.write(write, still_cached=True)
    assert api.patches == [("pg", "status"), ("pg", None)]
    assert api.get(POD_GROUP, "pg", "ns")["status"]["phase"] == "Inqueue"  # type: ignore[index]


def test_a_404_on_a_cached_podgroup_is_logged_and_written_again() -> None:
    api = Server(status_subresource=True)
    stored = group()
    stored["metadata"].update(uid="u1", resourceVersion="7")
    writer = PodGroupStatusWriter(api)  # type: ignore[arg-type]
    result = SessionResult(phase_updates=(
        PhaseUpdate("u1", "ns", "pg", PodGroupPhase.PENDING, PodGroupPhase.INQUEUE),))
    jobs = {"u1": job("u1")}
    (write,) = writer.due({"ns/pg": stored}, jobs, result)
    with capture_logs() as logs:  # not in the API (a lagging cache still holds it): 404
        assert not writer.write(write, still_cached=True)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "PodGroup status not written: 404 though the cache holds the PodGroup; "
        "writing it again next session"]
    assert writer.due({"ns/pg": stored}, jobs, result) == [write]  # the next session retries


def test_a_podgroup_gone_from_the_cache_too_is_not_an_error() -> None:
    api = Server(status_subresource=True)
    writer = PodGroupStatusWriter(api)  # type: ignore[arg-type]
    write = StatusWrite("ns/pg", "ns", "pg", GroupStatus("Inqueue", None), group())
    with capture_logs() as logs:
        assert not writer.write(write, still_cached=False)
    assert not [e for e in logs if e["log_level"] == "warning"]


def test_other_failures_are_logged_and_written_again() -> None:
    api = Server(status_subresource=True)
    stored = api.create(POD_GROUP, group(), "ns")
    writer = PodGroupStatusWriter(api)  # type: ignore[arg-type]

    def refuse(*_: Any, **__: Any) -> dict[str, Any]:
        raise ApiError(500, "InternalError", "etcd", "PATCH", "/x")

    api.merge_patch = refuse  # type: ignore[method-assign]
    with capture_logs() as logs:
        assert not writer.write(StatusWrite("ns/pg", "ns", "pg", GroupStatus("Inqueue", None),
                                            stored), still_cached=True)
    assert any(e["log_level"] == "warning" and "500" in e["error"] for e in logs)


def test_due_writes_a_first_phase_and_the_gang_condition() -> None:
    writer = PodGroupStatusWriter(Server(True))  # type: ignore[arg-type]
    stored = group()
    stored["metadata"].update(uid="u1", resourceVersion="1")
    (write,) = writer.due({"ns/pg": stored}, {"u1": job("u1")}, SessionResult())
    assert write.status.phase == "Pending"  # no phase yet: Pending is written, as Volcano does
    condition = write.status.condition
    assert condition is not None
    assert (condition.type, condition.status, condition.reason) == (
        names.CONDITION_UNSCHEDULABLE, "True", names.REASON_NOT_ENOUGH_RESOURCES)
    assert condition.message.startswith("2/2 tasks in gang unschedulable: pod group is not ready")


def test_a_ready_job_is_scheduled_and_a_job_without_pods_gets_no_condition() -> None:
    writer = PodGroupStatusWriter(Server(True))  # type: ignore[arg-type]
    ready, empty = group("a"), group("b")
    ready["metadata"].update(uid="a", resourceVersion="1")
    empty["metadata"].update(uid="b", resourceVersion="1")
    jobs = {"a": job("a", placed=2, phase=PodGroupPhase.RUNNING), "b": job("b", tasks=0)}
    writes = {w.key: w.status for w in writer.due({"ns/a": ready, "ns/b": empty}, jobs,
                                                  SessionResult())}
    assert writes["ns/a"] == GroupStatus("Running", Condition(
        names.CONDITION_SCHEDULED, "True", names.REASON_GANG_READY, ""))
    assert writes["ns/b"] == GroupStatus("Pending", None)


def test_nothing_is_written_while_the_object_shows_it_or_our_write_is_in_flight() -> None:
    api = Server(status_subresource=True)
    stored = api.create(POD_GROUP, group(), "ns")
    stored = {**stored, "metadata": {**stored["metadata"], "uid": "u1"}}
    writer = PodGroupStatusWriter(api)  # type: ignore[arg-type]
    jobs = {"u1": job("u1")}
    (write,) = writer.due({"ns/pg": stored}, jobs, SessionResult())
    assert writer.write(write, still_cached=True)
    assert writer.due({"ns/pg": stored}, jobs, SessionResult()) == []  # cache not caught up
    shown = api.get(POD_GROUP, "pg", "ns")
    assert shown is not None
    assert writer.due({"ns/pg": {**shown, "metadata": {**shown["metadata"], "uid": "u1"}}},
                      jobs, SessionResult()) == []
    # someone else rewrote the status: level-triggered, it is written again
    other = {**shown, "metadata": {**shown["metadata"], "uid": "u1", "resourceVersion": "99"},
             "status": {"phase": "Pending"}}
    assert len(writer.due({"ns/pg": other}, jobs, SessionResult())) == 1


def test_conditions_merge_by_type_and_keep_their_time_while_their_status_holds() -> None:
    old = [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
            "message": "1/2", "lastTransitionTime": "2026-01-01T00:00:00Z"},
           {"type": "Other", "status": "True"}]
    merged = merged_conditions(old, Condition("Unschedulable", "True", "NotEnoughResources",
                                              "2/2"))
    assert [c["type"] for c in merged] == ["Unschedulable", "Other"]
    assert merged[0]["message"] == "2/2"
    assert merged[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    merged = merged_conditions(old, Condition("Scheduled", "True", "ready", ""))
    assert [c["type"] for c in merged] == ["Unschedulable", "Other", "Scheduled"]


# --- the scheduler on Volcano's CRD shape --------------------------------------------------

NODE = {"metadata": {"name": "n1", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": "1",
                         "annotations": {"scheduling.k8s.io/group-name": "pg"}},
            "spec": {"schedulerName": "volcano",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending"}}


def scheduler_on(api: Server, cpu: str, min_resources: dict[str, str] | None = None) -> Scheduler:
    scheduler = Scheduler(api)  # type: ignore[arg-type]
    body = group()
    if min_resources:
        body["spec"]["minResources"] = min_resources
    stored = api.create(POD_GROUP, body, "ns")
    cache = scheduler.cache
    cache.on_event(CachedKind.NODE, "ADDED", NODE)
    cache.on_event(CachedKind.QUEUE, "ADDED", {"metadata": {"name": "default"},
                                                "spec": {"weight": 1}})
    cache.on_event(CachedKind.POD_GROUP, "ADDED", stored)
    for name in ("a", "b"):
        cache.on_event(CachedKind.POD, "ADDED", pod(name, cpu))
    return scheduler


def test_overcommit_enqueue_is_kept_with_volcanos_crd() -> None:
    """Two pods of 3 cpu on one 4-cpu node: the gang cannot be placed, but its minResources
    (4 cpu) are within overcommit's 1.2 x 4 cpu, so enqueue moves it to Inqueue; that phase
    (and the gang's Unschedulable condition) must land on the object, which has no status
    subresource."""
    api = Server(status_subresource=False)
    scheduler = scheduler_on(api, "3", {"cpu": "4"})
    try:
        scheduler.run_once()
        shown = api.get(POD_GROUP, "pg", "ns")
        assert shown is not None
        assert shown["status"]["phase"] == "Inqueue"
        (condition,) = shown["status"]["conditions"]
        assert (condition["type"], condition["reason"]) == ("Unschedulable", "NotEnoughResources")
    finally:
        scheduler.close()


def test_a_placed_gang_shows_running_and_scheduled_with_volcanos_crd() -> None:
    api = Server(status_subresource=False)
    scheduler = scheduler_on(api, "1")
    try:
        outcome = scheduler.run_once()
        assert outcome.wait_for_binds(10) == (2, 0)
        shown = api.get(POD_GROUP, "pg", "ns")
        assert shown is not None
        assert shown["status"]["phase"] == "Running"
        assert [c["type"] for c in shown["status"]["conditions"]] == ["Scheduled"]
    finally:
        scheduler.close()
