"""What `kubectl describe elasticquota` says (issue 33 part 5), and the controller's own guard
when the webhook is down (part 4): a refused edit leaves the last valid quota in force.

Driven on an in-memory API: the quota objects live there, so the status patches land on them
and a second controller started on the same objects (a restart) sees what was reported.
"""

from __future__ import annotations

from typing import Any

from koordqueue.domain.names import (
    QUEUE_POLICY_KEY,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
)
from koordqueue.domain.resources import Resources
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi

T1 = "2026-01-01T10:00:00Z"
T2 = "2026-01-01T10:00:07Z"


def quota(
    name: str,
    namespace: str = "default",
    *,
    cpu: Any = "4",
    parent: str | None = None,
    policy: str | None = None,
    created: str = T1,
) -> dict[str, Any]:
    labels = {}
    if parent:
        labels[QUOTA_PARENT_LABEL] = parent
    if policy:
        labels[QUEUE_POLICY_KEY] = policy
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": labels,
            "creationTimestamp": created,
            "generation": 1,
        },
        "spec": {"max": {"cpu": cpu}},
    }


class Plane:
    """The in-memory API and one controller on it; quotas are stored, then their events fed."""

    def __init__(self, api: MemoryApi | None = None) -> None:
        self.api = api or MemoryApi()
        self.c = Controller(self.api, ControllerSettings(), writers=1)

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        m = obj["metadata"]
        key = self.api._key(ELASTIC_QUOTA, m["namespace"], m["name"])
        stored = self.api.objects.get(key)
        if stored is None:
            stored = self.api.create(ELASTIC_QUOTA, obj, m["namespace"])
        else:
            stored = {**obj, "status": stored.get("status") or {}}
            stored["metadata"] = {**obj["metadata"], "resourceVersion": "9"}
            self.api.objects[key] = stored
        self.c.on_quota("MODIFIED", stored)
        self.fold_queues()
        return stored

    def fold_queues(self) -> None:
        for (kind, _, _), obj in list(self.api.objects.items()):
            if kind == QUEUE.plural:
                self.c.on_queue("MODIFIED", obj)

    def stored(self, name: str, namespace: str = "default") -> dict[str, Any]:
        return self.api.objects[self.api._key(ELASTIC_QUOTA, namespace, name)]

    def condition(self, name: str, kind: str, namespace: str = "default") -> dict[str, Any]:
        conditions = (self.stored(name, namespace).get("status") or {}).get("conditions") or []
        return next(c for c in conditions if c["type"] == kind)

    def events(self, reason: str, name: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.api.events
            if e["reason"] == reason
            and (name is None or e["involvedObject"]["name"] == name)
            and e["involvedObject"]["kind"] == "ElasticQuota"
        ]

    def resync(self) -> None:
        self.c.resync()


def admitted_unit(plane: Plane, quota_name: str, cpu: str) -> str:
    unit = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "QueueUnit",
        "metadata": {"name": "u", "namespace": "ns", "labels": {QUOTA_NAME_LABEL: quota_name}},
        "spec": {"resource": {"cpu": cpu}},
    }
    stored = plane.api.create(QUEUE_UNIT, unit, "ns")
    plane.c.on_unit("ADDED", stored)
    plane.c.admission_round()
    uid = str(stored["metadata"]["uid"])
    assert plane.c.engine.tree.is_admitted(uid)
    return uid


def test_a_valid_quota_says_valid_and_active() -> None:
    p = Plane()
    p.put(quota("a"))
    assert p.condition("a", "Valid")["status"] == "True"
    active = p.condition("a", "Active")
    assert (active["status"], active["reason"]) == ("True", "Active")
    assert "koord-queue/a" in active["message"]
    assert p.api.events == []


def test_an_invalid_edit_keeps_the_last_valid_quota_and_no_admitted_unit_is_undone() -> None:
    p = Plane()
    p.put(quota("a", cpu="4"))
    uid = admitted_unit(p, "a", "3")
    p.put(quota("a", cpu="-1"))  # the webhook was down; CEL was not there yet
    assert p.c.engine.tree.limit("a") == Resources.of(cpu="4")
    assert p.c.engine.tree.is_admitted(uid)
    valid = p.condition("a", "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidQuota")
    assert "spec.max[cpu]" in valid["message"] and "must not be negative" in valid["message"]
    assert "stays in force" in valid["message"]
    assert p.condition("a", "Active")["status"] == "True"  # the old definition admits
    events = p.events("InvalidQuota", "a")
    assert len(events) == 1 and events[0]["type"] == "Warning"
    assert "spec.max[cpu]" in events[0]["message"]


def test_every_problem_of_a_refused_quota_is_in_one_message() -> None:
    p = Plane()
    obj = quota("a", cpu="zz")
    obj["spec"]["min"] = {"cpu": "1", "memory": "-1Gi"}
    p.put(obj)
    message = p.condition("a", "Valid")["message"]
    for part in ("spec.max[cpu]", "spec.min[memory]", "no definition of it is in force"):
        assert part in message, message
    assert p.condition("a", "Active")["status"] == "False"


def test_a_cause_is_reported_once_not_at_every_resync_nor_after_a_restart() -> None:
    p = Plane()
    p.put(quota("a"))
    p.put(quota("a", cpu="-1"))
    for _ in range(3):
        p.resync()
    assert len(p.events("InvalidQuota", "a")) == 1
    restarted = Plane(p.api)
    restarted.resync()
    assert len(restarted.events("InvalidQuota", "a")) == 1  # the condition already says it
    assert restarted.condition("a", "Valid")["status"] == "False"


def test_fixing_the_quota_turns_valid_true_again() -> None:
    p = Plane()
    p.put(quota("a"))
    p.put(quota("a", cpu="-1"))
    p.put(quota("a", cpu="6"))
    assert p.condition("a", "Valid")["status"] == "True"
    assert p.c.engine.tree.limit("a") == Resources.of(cpu="6")


def test_a_parent_edit_that_closes_a_cycle_is_refused_and_the_old_parent_stays() -> None:
    p = Plane()
    p.put(quota("a"))
    p.put(quota("b", parent="a"))
    uid = admitted_unit(p, "b", "1")
    p.put(quota("a", parent="b"))
    assert p.c.engine.tree.path("b") == ("b", "a")
    assert p.c.engine.tree.is_admitted(uid)
    valid = p.condition("a", "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "QuotaCycle")
    assert "a -> b -> a" in valid["message"]
    assert len(p.events("QuotaCycle", "a")) == 1


def test_quotas_created_in_a_cycle_say_so_on_each_quota() -> None:
    p = Plane()
    p.put(quota("a", parent="b"))
    p.put(quota("b", parent="a"))
    for name in ("a", "b"):
        active = p.condition(name, "Active")
        assert (active["status"], active["reason"]) == ("False", "QuotaCycle"), active
        assert len(p.events("QuotaCycle", name)) == 1


def test_a_missing_parent_is_a_condition_without_an_event_until_the_parent_comes() -> None:
    p = Plane()
    p.put(quota("child", parent="later"))
    active = p.condition("child", "Active")
    assert (active["status"], active["reason"]) == ("False", "ParentNotFound")
    assert "later" in active["message"]
    assert p.api.events == []
    p.put(quota("later"))
    assert p.condition("child", "Active")["status"] == "True"


def test_an_unserved_policy_is_said_on_the_quota() -> None:
    p = Plane()
    p.put(quota("r", policy="Round"))
    active = p.condition("r", "Active")
    assert (active["status"], active["reason"]) == ("False", "AddQueueFail"), active
    assert "Round" in active["message"]
    assert len(p.events("AddQueueFail", "r")) == 1


def test_of_two_same_name_quotas_the_older_is_in_force_whatever_the_event_order() -> None:
    for order in (("old", "new"), ("new", "old")):
        p = Plane()
        objs = {
            "old": quota("twin", "ns-b", cpu="1", policy="Block", created=T1),
            "new": quota("twin", "ns-a", cpu="2", policy="Intelligent", created=T2),
        }
        for which in order:
            p.put(objs[which])
        for _ in range(2):  # resyncs fold both copies again: the copy in force stays
            p.resync()
            live = p.c.engine.tree.get("twin")
            assert live is not None and live.namespace == "ns-b"
            queue = p.api.get(QUEUE, "twin", "koord-queue") or {}
            assert queue["spec"]["queuePolicy"] == "Block"
        ignored = p.condition("twin", "Active", "ns-a")
        assert (ignored["status"], ignored["reason"]) == ("False", "DuplicateQuotaName")
        events = p.events("DuplicateQuotaName")
        assert len(events) == 1, events
        assert events[0]["involvedObject"]["namespace"] == "ns-a"
        assert "ns-b/twin is in force" in events[0]["message"]
        assert p.condition("twin", "Active", "ns-b")["status"] == "True"
