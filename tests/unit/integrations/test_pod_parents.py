"""Deployments and StatefulSets queued through their pods (issue 26).

The webhook cases are Kueue v0.17.0's deployment_webhook_test.go and statefulset_webhook_test.go
(TestDefault, TestValidateUpdate), in our words: the queue-name label is our quota label, a
template mark is our pod group (name, total count, serving) instead of Kueue's
suspended-by-parent annotation. The serving group's rules are Kueue's StatefulSet workload
(one pod set "main" of `replicas`, owned by the StatefulSet, admitted before every pod exists)
and its pod reconciler (a replica that comes while admitted is ungated).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.cli.flags import _integrations
from koordqueue.domain.integrations import POD, integration_names, parse_integrations
from koordqueue.domain.integrations.base import InvalidJobError
from koordqueue.domain.integrations.pod_parents import (
    DEPLOYMENT,
    STATEFULSET,
    group_name,
    parent_gating,
    review_parent,
    template_patch,
    update_problems,
)
from koordqueue.domain.names import (
    POD_ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_SERVING_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUOTA_NAME_LABEL,
)
from koordqueue.domain.queue_unit import Phase
from koordqueue.domain.resources import Resources
from koordqueue.kube.api import POD as POD_KIND
from koordqueue.kube.api import QUEUE_UNIT
from koordqueue.kube.settings import ControllerSettings
from koordqueue.kube.webhooks import pod_parents as webhook
from koordqueue.kube.webhooks.routes import webhook_routes
from tests.unit.integrations.helpers import container
from tests.unit.integrations.test_reconciler import Served

APPWRAPPER_OWNER = {
    "apiVersion": "workload.codeflare.dev/v1beta2",
    "kind": "AppWrapper",
    "name": "aw",
    "uid": "aw-uid",
    "controller": True,
}


def parent(
    kind: str = "StatefulSet",
    *,
    quota: str | None = "q",
    replicas: int | None = 3,
    ready: int = 0,
    status_replicas: int = 0,
    template_labels: dict[str, str] | None = None,
    cpu: str = "1",
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web", **(template_labels or {})}},
            "spec": {"containers": [container(cpu)]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    m: dict[str, Any] = {"name": "web", "namespace": "ns", "uid": "sts-uid"}
    if quota is not None:
        m["labels"] = {QUOTA_NAME_LABEL: quota}
    if owner is not None:
        m["ownerReferences"] = [owner]
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": m,
        "spec": spec,
        "status": {"readyReplicas": ready, "replicas": status_replicas},
    }


def template_meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = obj["spec"]["template"]["metadata"]
    return meta


def applied(obj: dict[str, Any]) -> dict[str, Any]:
    patch = template_patch(STATEFULSET if obj["kind"] == "StatefulSet" else DEPLOYMENT, obj)
    if patch is None:
        return obj
    out = copy.deepcopy(obj)
    out["spec"]["template"]["metadata"].setdefault("labels", {}).update(
        patch.body["spec"]["template"]["metadata"].get("labels") or {}
    )
    out["spec"]["template"]["metadata"].setdefault("annotations", {}).update(
        patch.body["spec"]["template"]["metadata"].get("annotations") or {}
    )
    return out


GATING = parent_gating("koord-queue", (DEPLOYMENT, STATEFULSET), parse_integrations(
    "pod,workload.codeflare.dev/appwrapper"
))
assert GATING is not None


# --- TestDefault ---------------------------------------------------------------------------
def test_a_statefulset_with_a_quota_marks_its_template_as_one_serving_group() -> None:
    """'statefulset with queue'."""
    meta = template_meta(applied(parent()))
    assert meta["labels"][QUOTA_NAME_LABEL] == "q"
    assert meta["labels"][POD_GROUP_NAME_LABEL] == "statefulset-web"
    assert meta["annotations"] == {
        POD_GROUP_TOTAL_COUNT_ANNOTATION: "3",
        POD_GROUP_SERVING_ANNOTATION: "true",
    }


def test_a_statefulset_without_replicas_is_a_group_of_one() -> None:
    """'statefulset without replicas': the API server's default, 1."""
    meta = template_meta(applied(parent(replicas=None)))
    assert meta["annotations"][POD_GROUP_TOTAL_COUNT_ANNOTATION] == "1"


def test_a_statefulset_scaled_to_zero_keeps_its_template_count() -> None:
    """A template change would roll its pods; its unit goes with its last pod anyway."""
    marked = applied(parent(replicas=3))
    marked["spec"]["replicas"] = 0
    assert template_patch(STATEFULSET, marked) is None


def test_objects_without_a_quota_are_left_alone() -> None:
    """'statefulset without queue', 'deployment without queue with pod template spec
    queue': the template's own label stays, nothing is added."""
    assert template_patch(STATEFULSET, parent(quota=None)) is None
    labelled = parent("Deployment", quota=None, template_labels={QUOTA_NAME_LABEL: "q"})
    assert template_patch(DEPLOYMENT, labelled) is None


def test_a_deployment_with_a_quota_puts_it_on_its_template_only() -> None:
    """'deployment with queue' and 'with queue and pod template spec queue': the object's
    quota wins; no group (each pod is queued alone)."""
    obj = parent("Deployment", quota="new", template_labels={QUOTA_NAME_LABEL: "old"})
    meta = template_meta(applied(obj))
    assert meta["labels"] == {"app": "web", QUOTA_NAME_LABEL: "new"}
    assert "annotations" not in meta or not meta["annotations"]


def test_an_object_owned_by_another_enabled_workload_is_that_workloads() -> None:
    """'statefulset managed by another framework' (and the scale-up cases with an AppWrapper
    owner): neither marked nor refused."""
    owned = parent(owner=APPWRAPPER_OWNER)
    assert review_parent(GATING, "CREATE", owned, None).patch is None
    bigger = copy.deepcopy(owned)
    bigger["spec"]["replicas"] = 4
    assert review_parent(GATING, "UPDATE", bigger, owned).denied is None


def test_a_long_name_gives_a_group_label_that_fits() -> None:
    obj = parent()
    obj["metadata"]["name"] = "n" * 63
    name = group_name(STATEFULSET, obj)
    assert name is not None
    assert len(name) <= 63
    assert name.startswith("statefulset-n")


# --- TestValidateUpdate --------------------------------------------------------------------
def _update(old: dict[str, Any], **changes: Any) -> list[str]:
    new = copy.deepcopy(old)
    for key, value in changes.items():
        if key == "quota":
            if value is None:
                new["metadata"]["labels"].pop(QUOTA_NAME_LABEL, None)
            else:
                new["metadata"].setdefault("labels", {})[QUOTA_NAME_LABEL] = value
        elif key == "status_replicas":
            new["status"]["replicas"] = value
        else:
            new["spec"][key] = value
    kind = STATEFULSET if old["kind"] == "StatefulSet" else DEPLOYMENT
    return update_problems(kind, old, new)


@pytest.mark.parametrize("kind", ["StatefulSet", "Deployment"])
def test_the_quota_label_is_fixed_while_replicas_are_ready(kind: str) -> None:
    """'change in queue label' (allowed) / '(ReadyReplicas > 0)' (refused), 'set queue label
    (ReadyReplicas > 0)' (refused), 'delete queue name' (refused)."""
    assert _update(parent(kind)) == []  # 'no changes'
    assert _update(parent(kind), quota="other") == []
    (problem,) = _update(parent(kind, ready=1), quota="other")
    assert problem.startswith(f"metadata.labels[{QUOTA_NAME_LABEL}]: field is immutable")
    (problem,) = _update(parent(kind, quota=None, ready=1), quota="q")
    assert QUOTA_NAME_LABEL in problem
    (problem,) = _update(parent(kind), quota=None)
    assert problem == f"metadata.labels[{QUOTA_NAME_LABEL}]: field is immutable"


def test_a_queued_statefulset_scales_only_to_and_from_zero() -> None:
    """'change in replicas': scale down to zero, up from zero (allowed); scale up 3 -> 4
    (refused, Invalid); up from zero while the previous scale-down still has pods (refused,
    Forbidden); the same without a quota (allowed)."""
    assert _update(parent(replicas=3), replicas=0) == []
    assert _update(parent(replicas=0), replicas=3) == []
    (problem,) = _update(parent(replicas=3), replicas=4)
    assert problem.startswith("spec.replicas: field is immutable")
    (problem,) = _update(parent(replicas=0, status_replicas=3), replicas=3, status_replicas=1)
    assert problem == "spec.replicas: Forbidden: scaling down is still in progress"
    assert _update(parent(quota=None, replicas=3), replicas=4) == []
    assert _update(parent(quota=None, replicas=0, status_replicas=3), replicas=3) == []


def test_a_deployment_resizes_freely() -> None:
    """Each of its pods is a unit of its own: a scale-up queues the new pods."""
    assert _update(parent("Deployment", replicas=3), replicas=5) == []


def test_a_queued_statefulsets_requests_are_fixed() -> None:
    """'attempt to change resources in container': refused naming
    spec.template.spec.containers[0].resources.requests."""
    old = parent(cpu="1")
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    (problem,) = update_problems(STATEFULSET, old, new)
    assert problem == "spec.template.spec.containers[0].resources.requests: field is immutable"
    image_only = copy.deepcopy(old)
    image_only["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    assert update_problems(STATEFULSET, old, image_only) == []


def test_a_bad_replica_count_is_named() -> None:
    with pytest.raises(InvalidJobError, match=r"spec.replicas: -1: must not be negative"):
        template_patch(STATEFULSET, parent(replicas=-1))


# --- the webhook review -----------------------------------------------------------------------
def _admission(operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> Any:
    request: dict[str, Any] = {
        "uid": "u1",
        "operation": operation,
        "namespace": "ns",
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def test_the_review_answers_a_json_patch_and_refuses_with_every_reason() -> None:
    obj = parent()
    answer = webhook.review(_admission("CREATE", obj), GATING)["response"]
    assert answer["allowed"] is True
    ops = json.loads(base64.b64decode(answer["patch"]))
    result = jsonpatch.apply_patch(obj, ops)
    assert template_meta(result) == template_meta(applied(obj))

    old = applied(parent(ready=2))
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    new["metadata"]["labels"][QUOTA_NAME_LABEL] = "other"
    refused = webhook.review(_admission("UPDATE", new, old), GATING)["response"]
    assert refused["allowed"] is False
    message = refused["status"]["message"]
    assert message.startswith('StatefulSet "web" is invalid: ')
    assert "spec.replicas: field is immutable" in message
    assert f"metadata.labels[{QUOTA_NAME_LABEL}]: field is immutable" in message


def test_the_route_is_served_when_a_parent_is_enabled() -> None:
    class NoApi:
        def list_objects(self, *_: Any, **__: Any) -> list[dict[str, Any]]:
            return []

    on = ControllerSettings(integrations="batch/job,statefulset")
    routes = webhook_routes(on, NoApi(), controller=True)  # type: ignore[arg-type]
    assert webhook.PATH in routes
    assert "mutate-pods" in routes  # the pod path is enabled with it
    answer = asyncio.run(routes[webhook.PATH](_admission("CREATE", parent())))
    assert answer["response"]["patch"]
    off = ControllerSettings(integrations="batch/job,pod")
    assert webhook.PATH not in webhook_routes(off, NoApi(), controller=True)  # type: ignore[arg-type]


def test_naming_a_parent_enables_the_pod_path_and_keeps_its_name() -> None:
    assert parse_integrations("statefulset,deployment") == (POD,)
    assert parse_integrations("pod,statefulset") == (POD,)
    assert integration_names("batch/job, statefulset,statefulset") == ["batch/job", "statefulset"]
    assert _integrations("deployment,batch/job") == "deployment,batch/job"
    with pytest.raises(ValueError, match="unknown integrations replicaset"):
        integration_names("replicaset")


# --- the serving group on the pod path ----------------------------------------------------------
STS_OWNER = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "name": "web",
    "uid": "sts-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}


def replica(index: int, *, gated: bool = True, cpu: str = "1") -> dict[str, Any]:
    """A pod as the StatefulSet controller makes it from the marked template (and the pod
    webhook gates it)."""
    spec: dict[str, Any] = {"containers": [container(cpu)]}
    if gated:
        spec["schedulingGates"] = [{"name": POD_ADMISSION_GATE}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{index}",
            "namespace": "ns",
            "labels": {QUOTA_NAME_LABEL: "q", POD_GROUP_NAME_LABEL: "statefulset-web"},
            "annotations": {
                POD_GROUP_TOTAL_COUNT_ANNOTATION: "3",
                POD_GROUP_SERVING_ANNOTATION: "true",
            },
            "ownerReferences": [STS_OWNER],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def test_a_serving_group_asks_for_every_replica_from_its_first_pod() -> None:
    """Kueue's StatefulSet workload: one pod set "main" of `replicas`, made before the
    other pods exist (an OrderedReady StatefulSet makes them one at a time)."""
    first = replica(0, cpu="2")
    assert POD.expected_members([first]) == 1
    (pod_set,) = POD.pod_sets([first])
    assert (pod_set.name, pod_set.count) == ("main", 3)
    assert POD.resource([first]).to_quantities() == {"cpu": "6"}
    owners = [(r["kind"], r["name"]) for r in POD.owner_references([first])]
    assert owners == [("Pod", "web-0"), ("StatefulSet", "web")]
    assert POD.admits_late_members([first])
    plain = replica(0)
    del plain["metadata"]["annotations"][POD_GROUP_SERVING_ANNOTATION]
    assert POD.expected_members([plain]) == 3
    assert not POD.admits_late_members([plain])


def test_a_statefulsets_group_is_admitted_once_scales_down_and_queues_again() -> None:
    """The lifecycle on the in-memory API: the first pod makes the unit (3 x 1 cpu); once
    admitted it is let go, and so is every replica that comes later (late members); the unit
    outlives the pod it was made with (owned by the StatefulSet too); the last pod's
    deletion (scaled to 0) deletes the unit; a new pod (scaled up again) queues again.
    Fails without the late-member rule (web-1 stays gated; checked)."""
    s = Served(POD)
    s.event("ADDED", s.put(replica(0)))
    unit = s.unit("statefulset-web-pod-qu", "ns")
    assert unit["spec"]["resource"] == {"cpu": "3"}
    assert [p["count"] for p in unit["spec"]["podSet"]] == [3]

    s.set_phase("statefulset-web-pod-qu", "ns", Phase.DEQUEUED)
    s.event("MODIFIED", s.current("web-0", "ns"))
    assert not s.current("web-0", "ns")["spec"].get("schedulingGates")

    s.api.merge_patch(POD_KIND, "web-0", {"status": {"phase": "Running"}}, "ns", "status")
    s.event("ADDED", s.put(replica(1)))
    assert not s.current("web-1", "ns")["spec"].get("schedulingGates"), "late replica let go"

    # the pod the unit was made with is replaced: the unit stays (owned by the StatefulSet)
    gone = s.current("web-0", "ns")
    s.api.delete(POD_KIND, "web-0", "ns")
    s.event("DELETED", gone)
    assert s.api.get(QUEUE_UNIT, "statefulset-web-pod-qu", "ns") is not None
    s.event("ADDED", s.put(replica(0)))
    assert not s.current("web-0", "ns")["spec"].get("schedulingGates")

    # scaled to 0: the last pod's deletion deletes the unit (its quota back)
    for name in ("web-0", "web-1"):
        gone = s.current(name, "ns")
        s.api.delete(POD_KIND, name, "ns")
        s.event("DELETED", gone)
    assert s.api.get(QUEUE_UNIT, "statefulset-web-pod-qu", "ns") is None
    s.c.on_unit("DELETED", unit)  # its watch event

    # scaled up from 0: queued again, held until admitted
    s.event("ADDED", s.put(replica(0)))
    again = s.unit("statefulset-web-pod-qu", "ns")
    assert again["status"]["phase"] == Phase.ENQUEUED.value  # (made anew: it was deleted)
    assert s.current("web-0", "ns")["spec"]["schedulingGates"] == [{"name": POD_ADMISSION_GATE}]


def test_a_late_replica_of_a_group_not_admitted_stays_gated() -> None:
    """Fails with the late-member rule ignoring admission (checked): a replica of a waiting
    group would run outside its quota."""
    s = Served(POD)
    s.event("ADDED", s.put(replica(0)))
    s.event("ADDED", s.put(replica(1)))
    for name in ("web-0", "web-1"):
        assert s.current(name, "ns")["spec"]["schedulingGates"] == [{"name": POD_ADMISSION_GATE}]


def test_a_preempted_statefulset_group_is_held_again() -> None:
    """Its released pods cannot be gated again: they are deleted (the StatefulSet makes
    them anew, gated by the webhook), and the unit is Enqueued after preempted."""
    s = Served(POD)
    s.event("ADDED", s.put(replica(0)))
    s.set_phase("statefulset-web-pod-qu", "ns", Phase.DEQUEUED)
    s.event("MODIFIED", s.current("web-0", "ns"))
    assert not s.current("web-0", "ns")["spec"].get("schedulingGates")
    s.event("ADDED", s.put(replica(1)))  # a late replica, let go

    assert s.run(s.rec.suspend(s.unit("statefulset-web-pod-qu", "ns")))
    assert s.api.get(POD_KIND, "web-0", "ns") is None
    assert s.api.get(POD_KIND, "web-1", "ns") is None
    s.set_phase("statefulset-web-pod-qu", "ns", Phase.PREEMPTED)
    s.event("ADDED", s.put(replica(0)))  # remade by the StatefulSet, gated
    unit = s.unit("statefulset-web-pod-qu", "ns")
    assert unit["status"]["phase"] == Phase.ENQUEUED.value
    assert s.current("web-0", "ns")["spec"]["schedulingGates"] == [{"name": POD_ADMISSION_GATE}]


@given(count=st.integers(min_value=1, max_value=500), millis=st.integers(1, 64_000))
def test_a_serving_groups_unit_is_replicas_times_the_pod_request(count: int, millis: int) -> None:
    """Hypothesis: whatever the template's count and request, the unit made from the first
    pod holds count x request (no more pods needed)."""
    sts = parent(replicas=count, cpu=f"{millis}m")
    meta = template_meta(applied(sts))
    first = replica(0, cpu=f"{millis}m")
    first["metadata"]["annotations"] = dict(meta["annotations"])
    expected = Resources.parse({"cpu": f"{count * millis}m"})
    assert POD.resource([first]) == expected
    assert POD.pod_sets([first])[0].count == count
