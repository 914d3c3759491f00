"""The scheduler adapter's round against a recording fake API (binds, conditions, releases)."""

from __future__ import annotations

import threading
from typing import Any

from koordqueue.kube.api import ApiError
from koordqueue.kube.scheduler.cache import CachedKind
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import ControllerSettings
from koordqueue.scheduler.gates import GATE_NAME, OPT_IN_ANNOTATION


class RecordingApi:
    """Answers every write with {} and records (method, path, body)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        self.calls.append((method, path, body))
        return {}

    def create(self, kind: Any, body: Any, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("POST", kind.path(namespace), body))
        return {"metadata": {"name": "e"}}

    def merge_patch(self, kind: Any, name: str, patch: Any, namespace: str | None = None,
                    subresource: str | None = None) -> dict[str, Any]:
        self.calls.append(("PATCH", kind.path(namespace, name, subresource), patch))
        return {}

    def paths(self, suffix: str) -> list[str]:
        return [p for _m, p, _b in self.calls if p.endswith(suffix)]


NODE = {"metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
QUEUE = {"metadata": {"name": "default"}, "spec": {"weight": 1}}


def pod(name: str, cpu: str = "1", selector: dict[str, str] | None = None,
        gates: list[str] | None = None, opt_in: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name,
                     "annotations": {OPT_IN_ANNOTATION: "true"} if opt_in else {}},
        "spec": {"schedulerName": "volcano", "nodeSelector": selector or {},
                 "schedulingGates": [{"name": g} for g in gates or []],
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Pending"},
    }


def scheduler(*pods: dict[str, Any], gates: bool = False) -> tuple[Scheduler, RecordingApi]:
    api = RecordingApi()
    settings = ControllerSettings(
        feature_gates=f"SchedulingGatesQueueAdmission={'true' if gates else 'false'}")
    sched = Scheduler(api, settings)  # type: ignore[arg-type]
    sched.cache.replace(CachedKind.NODE, [NODE])
    sched.cache.replace(CachedKind.QUEUE, [QUEUE])
    sched.cache.replace(CachedKind.POD, pods)
    return sched, api


def test_a_placed_pod_is_bound_through_the_binding_subresource() -> None:
    sched, api = scheduler(pod("a"))
    sched.run_once()
    sched.drain()
    [(method, path, body)] = [c for c in api.calls if c[1].endswith("/binding")]
    assert (method, path) == ("POST", "/api/v1/namespaces/ns/pods/a/binding")
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}


def test_a_sent_bind_is_assumed_so_the_next_round_does_not_bind_again() -> None:
    sched, api = scheduler(pod("a"))
    sched.run_once()
    sched.run_once()
    sched.drain()
    assert len(api.paths("/binding")) == 1


def test_the_unschedulable_condition_is_written_only_when_it_changes() -> None:
    sched, api = scheduler(pod("a", selector={"zone": "nowhere"}))
    sched.run_once()
    sched.run_once()
    sched.drain()
    [(_m, _p, body)] = [c for c in api.calls if c[1].endswith("/pods/a/status")]
    cond = body["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodScheduled", "False", "Unschedulable")
    assert "didn't match node selector" in cond["message"]


def test_a_gated_pod_never_gets_the_unschedulable_condition() -> None:
    sched, api = scheduler(pod("g", cpu="64", gates=[GATE_NAME], opt_in=True), gates=True)
    sched.run_once()
    assert api.paths("/status") == []


def test_a_passing_gated_pod_is_released_not_bound() -> None:
    sched, api = scheduler(pod("g", gates=[GATE_NAME], opt_in=True), gates=True)
    assert sched.gates is not None
    outcome = sched.run_once()
    assert (outcome.released, api.paths("/binding")) == (["g"], [])
    assert sched.gates.queued("g")


def events(api: RecordingApi, reason: str) -> list[dict[str, Any]]:
    return [b for m, p, b in api.calls if m == "POST" and p.endswith("/events")
            and b["reason"] == reason]


def test_a_bound_pod_gets_a_scheduled_event_in_kube_schedulers_words() -> None:
    sched, api = scheduler(pod("a"))
    sched.run_once()
    sched.drain()
    [event] = events(api, "Scheduled")
    assert (event["type"], event["message"]) == ("Normal", "Successfully assigned ns/a to n1")
    assert event["involvedObject"]["name"] == "a"


def test_an_unplaced_pod_gets_a_failed_scheduling_event_with_its_fit_errors() -> None:
    sched, api = scheduler(pod("a", selector={"zone": "nowhere"}))
    sched.run_once()
    sched.drain()
    [event] = events(api, "FailedScheduling")
    assert event["type"] == "Warning" and "didn't match node selector" in event["message"]


class SlowBindApi(RecordingApi):
    """Holds every bind until `release` is set; can refuse the first one."""

    def __init__(self, refuse_first: bool = False) -> None:
        super().__init__()
        self.release = threading.Event()
        self.refuse = refuse_first

    def request(self, method: str, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
        if path.endswith("/binding"):
            assert self.release.wait(10)
            if self.refuse:
                self.refuse = False
                raise ApiError(409, "Conflict", "pod is being deleted", method, path)
        return super().request(method, path, body, **kw)


def test_a_session_does_not_wait_for_its_binds() -> None:
    api = SlowBindApi()
    sched = Scheduler(api, ControllerSettings())  # type: ignore[arg-type]
    sched.cache.replace(CachedKind.NODE, [NODE])
    sched.cache.replace(CachedKind.QUEUE, [QUEUE])
    sched.cache.replace(CachedKind.POD, [pod("a")])
    outcome = sched.run_once()  # returns although the bind is still held
    assert len(outcome.binds) == 1 and not outcome.binds[0].done()
    sched.cache.on_event(CachedKind.POD, "ADDED", pod("b"))
    second = sched.run_once()  # sees "a" as assumed on n1: places only "b"
    assert [b.task for b in second.result.binds] == ["b"]
    api.release.set()
    assert outcome.wait_for_binds(10) == (1, 0)
    sched.drain()


def test_a_failed_bind_is_forgotten_reported_and_placed_again() -> None:
    api = SlowBindApi(refuse_first=True)
    api.release.set()
    sched = Scheduler(api, ControllerSettings())  # type: ignore[arg-type]
    sched.cache.replace(CachedKind.NODE, [NODE])
    sched.cache.replace(CachedKind.QUEUE, [QUEUE])
    sched.cache.replace(CachedKind.POD, [pod("a")])
    sched.cache.work.clear()
    assert sched.run_once().wait_for_binds(10) == (0, 1)
    assert sched.cache.work.is_set()  # the loop is woken to place it again
    sched.drain()
    [event] = events(api, "FailedScheduling")
    assert "binding to node n1 rejected" in event["message"]
    assert sched.run_once().wait_for_binds(10) == (1, 0)
    assert len(api.paths("/binding")) == 1  # the refused call raised before being recorded
    sched.drain()


def test_a_podgroup_phase_change_is_written_to_its_status() -> None:
    """The phase update is matched to its PodGroup by namespace/name (the cache's job key)."""
    member = pod("m")
    member["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "gang"
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "gang", "namespace": "ns", "uid": "pg-uid"},
             "spec": {"minMember": 1, "queue": "default"}}
    sched, api = scheduler(member)
    sched.cache.replace(CachedKind.POD_GROUP, [group])
    sched.run_once()
    sched.drain()
    patches = [b for m, p, b in api.calls if p.endswith("/podgroups/gang/status")]
    assert patches and patches[-1]["status"]["phase"] in ("Inqueue", "Running")
