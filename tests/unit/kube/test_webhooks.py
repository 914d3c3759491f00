"""The webhooks' AdmissionReview answers (issue 33): ElasticQuota validation, workload
defaulting, and the one server's routing. The rules themselves are tested in the domain
(tests/unit/domain/test_quota_validation.py); these tests check what the API server gets."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

import jsonpatch  # kopf's own dependency: applies our patches as the API server would
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain.integrations import parse_integrations
from koordqueue.domain.integrations.workload_gate import unit_label_patch, workload_gating
from koordqueue.domain.names import (
    INTEGRATION_SUSPEND_ANNOTATION,
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
)
from koordqueue.kube.api import ApiError
from koordqueue.kube.settings import ControllerSettings
from koordqueue.kube.webhooks import elasticquota, workloads
from koordqueue.kube.webhooks.review import json_patch
from koordqueue.kube.webhooks.routes import webhook_routes
from koordqueue.kube.webhooks.server import dispatcher

ALL = "batch/job,kubeflow.org/pytorchjob,kubeflow.org/mpijob,jobset.x-k8s.io/jobset,pod"


def admission(
    operation: str, obj: Mapping[str, Any] | None, old: Any = None, namespace: str = "team-a"
) -> dict[str, Any]:
    kind = (obj or old or {}).get("kind", "")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "req-1",
            "operation": operation,
            "namespace": namespace,
            "kind": {"kind": kind},
            "object": obj,
            "oldObject": old,
        },
    }


def eq(name: str, namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "creationTimestamp": spec.pop("created", ""),
        },
        "spec": spec or {"max": {"cpu": "4"}},
    }


def patched(obj: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """The object as the API server stores it after the answer's JSON patch."""
    raw = answer["response"].get("patch")
    if raw is None:
        return copy.deepcopy(dict(obj))
    ops = json.loads(base64.b64decode(raw))
    result: dict[str, Any] = jsonpatch.apply_patch(dict(obj), ops)
    return result


# --- ElasticQuota ----------------------------------------------------------------------------
def test_a_denied_quota_lists_every_problem_with_its_field_for_kubectl() -> None:
    new = eq("team", max={"cpu": "-1"}, min={"memory": "1Gi"})
    answer = elasticquota.review(admission("CREATE", new), [eq("team", "other", created="t")])
    response = answer["response"]
    assert response["uid"] == "req-1" and response["allowed"] is False
    assert response["status"]["code"] == 422
    message = response["status"]["message"]
    assert message.startswith('ElasticQuota "team" is invalid: ')
    for line in (
        "* spec.max[cpu]: '-1' must not be negative",
        "* spec.min[memory]: memory has a min but no max",
        "* metadata.name: an ElasticQuota named team already exists in namespace other",
    ):
        assert line in message, message


def test_an_apply_order_problem_is_allowed_with_a_warning() -> None:
    child = eq("child", labels={QUOTA_PARENT_LABEL: "parent"})
    response = elasticquota.review(admission("CREATE", child), [])["response"]
    assert response["allowed"] is True and "patch" not in response
    assert response["warnings"] == [
        f"metadata.labels[{QUOTA_PARENT_LABEL}]: parent quota parent does not exist (yet): "
        "units of this quota are not admitted until it does"
    ]


def test_when_the_other_quotas_cannot_be_read_the_own_fields_are_still_checked() -> None:
    error = ApiError(503, "ServiceUnavailable", "etcd is down", "GET", "/apis")
    bad = elasticquota.review(admission("CREATE", eq("q", max={"cpu": "x"})), error)["response"]
    assert bad["allowed"] is False and "spec.max[cpu]" in bad["status"]["message"]
    assert any("could not be read (etcd is down)" in w for w in bad["warnings"])
    good = elasticquota.review(admission("CREATE", eq("q")), error)["response"]
    assert good["allowed"] is True


def test_an_update_compares_with_the_old_object_and_a_delete_only_warns() -> None:
    parent, child = (
        eq("p", labels={"quota.scheduling.koordinator.sh/is-parent": "true"}),
        eq("c", labels={QUOTA_PARENT_LABEL: "p"}),
    )
    off = eq("p")
    denied = elasticquota.review(admission("UPDATE", off, parent), [parent, child])["response"]
    assert (
        denied["allowed"] is False
        and "is-parent cannot be turned off" in denied["status"]["message"]
    )
    deleted = elasticquota.review(admission("DELETE", None, parent), [parent, child])["response"]
    assert deleted["allowed"] is True and "children (c)" in deleted["warnings"][0]


def test_status_writes_are_not_reviewed() -> None:
    review = admission("UPDATE", eq("q", max={"cpu": "-1"}), eq("q"))
    review["request"]["subResource"] = "status"
    assert elasticquota.review(review, [])["response"]["allowed"] is True


# --- workloads -------------------------------------------------------------------------------
GATING = workload_gating("koord-queue", parse_integrations(ALL))
assert GATING is not None


def job(
    namespace: str = "team-a",
    *,
    quota: str | None = "team-a",
    suspend: Any = None,
    owner: tuple[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": "train",
        "namespace": namespace,
        "labels": {QUOTA_NAME_LABEL: quota} if quota else {},
    }
    if owner:
        metadata["ownerReferences"] = [
            {"apiVersion": owner[0], "kind": owner[1], "name": "o", "uid": "u", "controller": True}
        ]
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "m"}]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def test_a_labelled_job_created_running_is_suspended() -> None:
    obj = job(suspend=False)
    answer = workloads.review(admission("CREATE", obj), GATING)
    stored = patched(obj, answer)
    assert answer["response"]["allowed"] is True
    assert stored["spec"]["suspend"] is True
    assert stored["metadata"]["annotations"] == {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}


def test_jobs_the_webhook_leaves_alone() -> None:
    for obj, namespace in [
        (job(quota=None), "team-a"),  # names no quota
        (job(suspend=True), "team-a"),  # opted in already
        (job("kube-system"), "kube-system"),  # the system's
        (job("koord-queue"), "koord-queue"),  # the controller's own
        (job(owner=("jobset.x-k8s.io/v1alpha2", "JobSet")), "team-a"),  # its JobSet is queued
    ]:
        answer = workloads.review(admission("CREATE", obj, namespace=namespace), GATING)
        assert "patch" not in answer["response"], obj
    update = admission("UPDATE", job(), job())
    assert "patch" not in workloads.review(update, GATING)["response"]


def test_other_integrations_are_held_their_own_way() -> None:
    pytorch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p", "namespace": "team-a", "labels": {QUOTA_NAME_LABEL: "q"}},
        "spec": {"pytorchReplicaSpecs": {}},
    }
    stored = patched(pytorch, workloads.review(admission("CREATE", pytorch), GATING))
    assert stored["spec"]["runPolicy"]["suspend"] is True
    assert stored["metadata"]["annotations"][INTEGRATION_SUSPEND_ANNOTATION] == "true"
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "s", "namespace": "team-a", "labels": {QUOTA_NAME_LABEL: "q"}},
        "spec": {"replicatedJobs": []},
    }
    stored = patched(jobset, workloads.review(admission("CREATE", jobset), GATING))
    assert stored["spec"]["suspend"] is True


def test_a_disabled_integration_kind_is_not_touched() -> None:
    only_jobs = workload_gating("koord-queue", parse_integrations("batch/job"))
    assert only_jobs is not None
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "s", "namespace": "team-a", "labels": {QUOTA_NAME_LABEL: "q"}},
        "spec": {},
    }
    assert "patch" not in workloads.review(admission("CREATE", jobset), only_jobs)["response"]


def test_koord_queue_rule_changes_nothing_and_warns_that_the_job_runs_outside_quota() -> None:
    rule = workload_gating("koord-queue", parse_integrations("batch/job"), suspend=False)
    assert rule is not None
    response = workloads.review(admission("CREATE", job()), rule)["response"]
    assert "patch" not in response
    assert response["warnings"][0].startswith(
        "Job train names quota team-a but was created running: it runs outside quota"
    )


# --- one server, routed by path ----------------------------------------------------------------
def test_one_server_routes_each_path_to_its_webhook() -> None:
    settings = ControllerSettings(integrations="batch/job,pod")

    class NoApi:
        def list_objects(self, *_: Any, **__: Any) -> list[dict[str, Any]]:
            return []

    routes = webhook_routes(settings, NoApi(), controller=True)  # type: ignore[arg-type]
    assert sorted(routes) == ["mutate-pods", "mutate-workloads", "validate-elasticquotas"]
    serve = dispatcher(routes)

    def call(path: str, review: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = asyncio.run(serve(review, webhook=path))
        return result

    quota = call("validate-elasticquotas", admission("CREATE", eq("q", max={"cpu": "-1"})))
    assert quota["response"]["allowed"] is False
    held = call("mutate-workloads", admission("CREATE", job()))
    assert patched(job(), held)["spec"]["suspend"] is True
    unknown = call("nowhere", admission("CREATE", job()))
    assert unknown["response"] == {"uid": "req-1", "allowed": True}


def test_a_review_that_raises_is_answered_allowed() -> None:
    async def broken(_: Mapping[str, Any]) -> dict[str, Any]:
        raise RuntimeError("bug")

    answer = asyncio.run(dispatcher({"x": broken})(admission("CREATE", job()), webhook="x"))
    assert answer["response"] == {"uid": "req-1", "allowed": True}


def test_the_scheduler_alone_serves_only_the_pod_webhook() -> None:
    on = ControllerSettings(feature_gates="SchedulingGatesQueueAdmission=true")
    assert sorted(webhook_routes(on, scheduler=True)) == ["mutate-pods"]
    # the controller without a pod integration and without workloads: quotas only
    quiet = ControllerSettings(manage_jobs=False)
    assert sorted(webhook_routes(quiet, object(), controller=True)) == [  # type: ignore[arg-type]
        "validate-elasticquotas"
    ]


# --- merge patch -> JSON patch -----------------------------------------------------------------
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.dictionaries(st.sampled_from(["a", "b/c", "d~e", "f"]), inner, max_size=3),
    max_leaves=10,
)
objects = st.dictionaries(st.sampled_from(["a", "b/c", "d~e", "f"]), json_value, max_size=4)


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386, as written in the RFC."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


@given(objects, objects)
def test_the_json_patch_does_what_the_merge_patch_would(
    obj: dict[str, Any], patch: dict[str, Any]
) -> None:
    expected = merge(obj, patch)
    assert jsonpatch.apply_patch(copy.deepcopy(obj), json_patch(obj, patch)) == expected


# --- a workload's labels reach its unit (the reconciler asks unit_label_patch) ---------------
def unit_obj(labels: dict[str, str], phase: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "train", "labels": labels}}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def test_a_quota_label_added_later_reaches_the_waiting_unit() -> None:
    patch = unit_label_patch({QUOTA_NAME_LABEL: "team-a", "app": "x"}, unit_obj({"app": "x"}))
    assert patch == {"metadata": {"labels": {QUOTA_NAME_LABEL: "team-a"}}}
    assert unit_label_patch(
        {QUOTA_NAME_LABEL: "b"}, unit_obj({QUOTA_NAME_LABEL: "a"}, "TimeoutBackoff")
    ) == {"metadata": {"labels": {QUOTA_NAME_LABEL: "b"}}}


def test_a_removed_quota_label_is_removed_from_the_waiting_unit_other_labels_are_kept() -> None:
    patch = unit_label_patch({}, unit_obj({QUOTA_NAME_LABEL: "a", "mine": "1"}))
    assert patch == {"metadata": {"labels": {QUOTA_NAME_LABEL: None}}}


def test_an_admitted_unit_keeps_its_quota_but_gets_the_other_labels() -> None:
    labels = {QUOTA_NAME_LABEL: "b", "team": "ml"}
    patch = unit_label_patch(labels, unit_obj({QUOTA_NAME_LABEL: "a"}, "Dequeued"))
    assert patch == {"metadata": {"labels": {"team": "ml"}}}
    assert unit_label_patch({QUOTA_NAME_LABEL: "a"}, unit_obj({QUOTA_NAME_LABEL: "a"})) is None


def test_a_jobsets_job_or_a_pod_is_not_told_it_runs_outside_quota() -> None:
    from koordqueue.domain.integrations import BATCH_JOB, POD
    from koordqueue.domain.integrations.workload_gate import outside_quota

    owners = {("jobset.x-k8s.io/v1alpha2", "JobSet")}
    assert outside_quota(BATCH_JOB, [job()], owners) is not None
    assert (
        outside_quota(BATCH_JOB, [job(owner=("jobset.x-k8s.io/v1alpha2", "JobSet"))], owners)
        is None
    )
    assert outside_quota(BATCH_JOB, [job(suspend=True)], owners) is None  # held: queued
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {QUOTA_NAME_LABEL: "q"}},
        "spec": {},
    }
    assert outside_quota(POD, [pod], owners) is None
