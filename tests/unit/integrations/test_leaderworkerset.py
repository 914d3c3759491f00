"""LeaderWorkerSets queued through their pods, one pod group per group (issue 26).

The cases are Kueue v0.17.0's pkg/controller/jobs/leaderworkerset tests, in our words:
leaderworkerset_webhook_test.go (TestDefault: both templates marked; TestValidateUpdate: the
queue name and the templates' admission fields fixed), leaderworkerset_pod_reconciler_test.go
(a pod gets its group from the LWS's name and its group index; leader, worker or main) and
leaderworkerset_reconciler_test.go (one workload per group, pod sets leader 1 + worker
size - 1, or main size; scale-down deletes a group's workload). Our group name has no hash
of the LWS's uid, and our quota label stands for Kueue's queue-name label.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from pathlib import Path
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest
import structlog
import yaml
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from koordqueue.domain.integrations import POD, integration_names, parse_integrations
from koordqueue.domain.integrations import leaderworkerset as lws
from koordqueue.domain.integrations.base import InvalidJobError
from koordqueue.domain.integrations.pod_gate import WARN_LWS_GROUP_MISSING, AdmissionGating
from koordqueue.domain.integrations.pod_parents import (
    LEADERWORKERSET,
    STATEFULSET,
    parent_gating,
    review_parent,
)
from koordqueue.domain.names import (
    POD_ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_ROLE_ANNOTATION,
    POD_GROUP_SERVING_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUOTA_NAME_LABEL,
    REASON_INVALID_JOB,
)
from koordqueue.domain.queue_unit import Phase
from koordqueue.domain.resources import Resources
from koordqueue.kube.api import POD as POD_KIND
from koordqueue.kube.api import QUEUE_UNIT
from koordqueue.kube.controller import integrations as controller_integrations
from koordqueue.kube.controller.integrations import CRD
from koordqueue.kube.gates.webhook import PodGating, pod_patch
from koordqueue.kube.settings import ControllerSettings
from koordqueue.kube.webhooks import pod_parents as webhook
from koordqueue.kube.webhooks.routes import webhook_routes
from tests.unit.cli.helpers import run
from tests.unit.integrations.helpers import container
from tests.unit.integrations.test_reconciler import Served, crd
from tests.unit.kube.memory_api import MemoryApi

GATING = parent_gating("koord-queue", [LEADERWORKERSET, STATEFULSET], [POD])
assert GATING is not None
CRD_FILE = (
    Path(__file__).resolve().parents[2] / "crds/integrations"
    / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
)


def leader_worker_set(
    *,
    quota: str | None = "q",
    size: Any = 3,
    replicas: int = 1,
    leader_cpu: str | None = "2",
    worker_cpu: str = "1",
    name: str = "lws",
) -> dict[str, Any]:
    """An LWS as a user applies it (leader_cpu None: no leader template)."""
    templates: dict[str, Any] = {
        "workerTemplate": {"spec": {"containers": [container(worker_cpu)]}},
    }
    if size is not None:
        templates["size"] = size
    if leader_cpu is not None:
        templates["leaderTemplate"] = {"spec": {"containers": [container(leader_cpu)]}}
    obj: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": "ns", "labels": {}},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": templates},
    }
    if quota:
        obj["metadata"]["labels"][QUOTA_NAME_LABEL] = quota
    return obj


def marked(obj: dict[str, Any]) -> dict[str, Any]:
    """The LWS as stored: the webhook's patch applied."""
    patch = lws.template_patch(obj)
    out = copy.deepcopy(obj)
    if patch is not None:
        out = jsonpatch.apply_patch(out, webhook.json_patch(out, patch.body))
    return out


def meta_of(obj: dict[str, Any], field: str) -> dict[str, Any]:
    metadata: dict[str, Any] = obj["spec"]["leaderWorkerTemplate"][field].get("metadata") or {}
    return metadata


def pod(
    stored: dict[str, Any], group: int, worker: int, *, gated: bool = True
) -> dict[str, Any]:
    """A pod as the LWS controller makes it from the stored templates (leader: worker index
    0, from the leader template when there is one), after the pod webhook (gate, group)."""
    name = stored["metadata"]["name"]
    templates = stored["spec"]["leaderWorkerTemplate"]
    field = "leaderTemplate" if worker == 0 and "leaderTemplate" in templates else "workerTemplate"
    template = templates[field]
    labels = {
        **(template.get("metadata") or {}).get("labels", {}),
        lws.LWS_NAME_LABEL: name,
        lws.LWS_GROUP_INDEX_LABEL: str(group),
        lws.LWS_WORKER_INDEX_LABEL: str(worker),
    }
    spec = copy.deepcopy(template["spec"])
    if gated:
        spec["schedulingGates"] = [{"name": POD_ADMISSION_GATE}]
    owner = "StatefulSet", name if worker == 0 else f"{name}-{group}"
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{group}" if worker == 0 else f"{name}-{group}-{worker}",
            "namespace": "ns",
            "labels": labels,
            "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": owner[0],
                    "name": owner[1],
                    "uid": f"{owner[1]}-uid",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    group_label = lws.pod_group(obj)
    if group_label is not None:
        obj["metadata"]["labels"][POD_GROUP_NAME_LABEL] = group_label
    return obj


def group_pods(stored: dict[str, Any], group: int) -> list[dict[str, Any]]:
    size = int(stored["spec"]["leaderWorkerTemplate"].get("size", 1))
    return [pod(stored, group, worker) for worker in range(size)]


# --- Kueue's TestDefault: the templates marked ----------------------------------------------------
def test_an_lws_with_a_leader_template_marks_both_templates() -> None:
    """Kueue: both templates get the suspended-by-parent and serving marks."""
    stored = marked(leader_worker_set())
    leader, worker = meta_of(stored, "leaderTemplate"), meta_of(stored, "workerTemplate")
    assert leader["labels"] == worker["labels"] == {QUOTA_NAME_LABEL: "q"}
    assert leader["annotations"] == {
        POD_GROUP_SERVING_ANNOTATION: "true",
        POD_GROUP_TOTAL_COUNT_ANNOTATION: "3",
        POD_GROUP_ROLE_ANNOTATION: "leader",
    }
    assert worker["annotations"][POD_GROUP_ROLE_ANNOTATION] == "worker"
    assert lws.template_patch(stored) is None  # marked already: nothing to write


def test_a_worker_only_lws_marks_its_one_template_main() -> None:
    """Kueue's "worker-only LWS (no leader template)": the worker template only, pod set main."""
    stored = marked(leader_worker_set(leader_cpu=None))
    assert "leaderTemplate" not in stored["spec"]["leaderWorkerTemplate"]
    assert meta_of(stored, "workerTemplate")["annotations"][POD_GROUP_ROLE_ANNOTATION] == "main"


def test_an_lws_without_a_quota_is_left_alone() -> None:
    """Kueue's "default lq isn't created, job doesn't have queue label": not touched."""
    assert lws.template_patch(leader_worker_set(quota=None)) is None
    answer = review_parent(GATING, "CREATE", leader_worker_set(quota=None), None)
    assert answer.patch is None and answer.denied is None


def test_an_absent_size_is_a_group_of_one() -> None:
    stored = marked(leader_worker_set(size=None, leader_cpu=None))
    assert meta_of(stored, "workerTemplate")["annotations"][POD_GROUP_TOTAL_COUNT_ANNOTATION] == "1"


@pytest.mark.parametrize(
    ("size", "reason"),
    [(0, "0: must be at least 1"), (-2, "-2: must not be negative"), ("3", "'3': must be a whole")],
)
def test_a_bad_size_is_refused_naming_the_field(size: Any, reason: str) -> None:
    answer = review_parent(GATING, "CREATE", leader_worker_set(size=size), None)
    assert answer.denied is not None
    assert "spec.leaderWorkerTemplate.size" in answer.denied and reason in answer.denied


# --- Kueue's TestValidateUpdate -------------------------------------------------------------------
def _with(obj: dict[str, Any], field: str, **resources: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    spec = out["spec"]["leaderWorkerTemplate"][field]["spec"]
    for key, value in resources.items():
        if key == "image":
            spec["containers"][0]["image"] = value
        elif key == "init_cpu":
            spec["initContainers"] = [container(value)]
        else:
            spec["containers"][0]["resources"]["requests"]["cpu"] = value
    return out


def test_no_change_is_allowed() -> None:
    stored = marked(leader_worker_set())
    assert lws.update_problems(stored, copy.deepcopy(stored)) == []


@pytest.mark.parametrize("new_quota", ["other", None])
def test_the_quota_label_cannot_change_or_go(new_quota: str | None) -> None:
    """Kueue's "change queue name" and "delete queue name"."""
    old = marked(leader_worker_set())
    new = copy.deepcopy(old)
    if new_quota is None:
        del new["metadata"]["labels"][QUOTA_NAME_LABEL]
    else:
        new["metadata"]["labels"][QUOTA_NAME_LABEL] = new_quota
    assert lws.update_problems(old, new) == [
        f"metadata.labels[{QUOTA_NAME_LABEL}]: field is immutable"
    ]


def test_an_image_may_change() -> None:
    """Kueue's "change image": not an admission field."""
    old = marked(leader_worker_set())
    new = _with(_with(old, "leaderTemplate", image="pause:0.1.1"), "workerTemplate", image="x")
    assert lws.update_problems(old, new) == []


def test_requests_in_either_template_cannot_change() -> None:
    """Kueue's "change resources in container" and "... in init containers": both named."""
    old = marked(leader_worker_set())
    new = _with(_with(old, "leaderTemplate", cpu="3"), "workerTemplate", cpu="5")
    base = "spec.leaderWorkerTemplate"
    assert lws.update_problems(old, new) == [
        f"{base}.leaderTemplate.spec.containers[0].resources.requests: field is immutable",
        f"{base}.workerTemplate.spec.containers[0].resources.requests: field is immutable",
    ]
    old_init = _with(_with(old, "leaderTemplate", init_cpu="1"), "workerTemplate", init_cpu="1")
    new_init = _with(
        _with(old_init, "leaderTemplate", init_cpu="2"), "workerTemplate", init_cpu="2"
    )
    assert lws.update_problems(old_init, new_init) == [
        f"{base}.leaderTemplate.spec.initContainers[0].resources.requests: field is immutable",
        f"{base}.workerTemplate.spec.initContainers[0].resources.requests: field is immutable",
    ]


def test_the_leader_template_cannot_come_or_go_and_the_review_refuses() -> None:
    old = marked(leader_worker_set())
    new = copy.deepcopy(old)
    del new["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    problem = "spec.leaderWorkerTemplate.leaderTemplate: field is immutable"
    assert lws.update_problems(old, new) == [problem]
    answer = review_parent(GATING, "UPDATE", new, old)
    assert answer.denied == f'LeaderWorkerSet "lws" is invalid: {problem}'


def test_leader_ready_startup_is_refused_for_a_queued_lws() -> None:
    """Ours, not Kueue's: with LeaderReady the workers would wait for a leader that stays
    gated until they exist."""
    obj = leader_worker_set()
    obj["spec"]["startupPolicy"] = "LeaderReady"
    answer = review_parent(GATING, "CREATE", obj, None)
    assert answer.denied is not None
    assert "spec.startupPolicy: Unsupported value: 'LeaderReady'" in answer.denied
    assert review_parent(GATING, "UPDATE", obj, marked(leader_worker_set())).denied
    unqueued = leader_worker_set(quota=None)
    unqueued["spec"]["startupPolicy"] = "LeaderReady"
    assert review_parent(GATING, "CREATE", unqueued, None).denied is None


def test_an_lws_without_a_quota_may_change_its_templates() -> None:
    old = leader_worker_set(quota=None)
    assert lws.update_problems(old, _with(old, "workerTemplate", cpu="9")) == []


# --- Kueue's pod reconciler: each pod's group -----------------------------------------------------
def test_a_pod_of_a_marked_lws_gets_its_groups_label() -> None:
    """Kueue's "should set default values": group from the LWS name and the group index."""
    stored = marked(leader_worker_set(replicas=2))
    leader = pod(stored, 1, 0)
    worker = pod(stored, 1, 2)
    assert leader["metadata"]["labels"][POD_GROUP_NAME_LABEL] == "leaderworkerset-lws-1"
    assert worker["metadata"]["labels"][POD_GROUP_NAME_LABEL] == "leaderworkerset-lws-1"
    assert leader["metadata"]["annotations"][POD_GROUP_ROLE_ANNOTATION] == "leader"
    assert worker["metadata"]["annotations"][POD_GROUP_ROLE_ANNOTATION] == "worker"


def test_a_pod_without_a_group_index_gets_no_group() -> None:
    """Kueue's "shouldn't set default values without group index label" (a worker), while
    a leader, whose index the LWS's own pod webhook may not have set yet, takes it from its
    name (<lws>-<index>)."""
    stored = marked(leader_worker_set())
    worker = pod(stored, 0, 1)
    del worker["metadata"]["labels"][lws.LWS_GROUP_INDEX_LABEL]
    del worker["metadata"]["labels"][POD_GROUP_NAME_LABEL]
    assert lws.pod_group(worker) is None
    leader = pod(stored, 4, 0)
    del leader["metadata"]["labels"][lws.LWS_GROUP_INDEX_LABEL]
    del leader["metadata"]["labels"][POD_GROUP_NAME_LABEL]
    assert lws.pod_group(leader) == "leaderworkerset-lws-4"


def test_a_pod_of_an_lws_without_a_quota_is_not_grouped() -> None:
    """Kueue's "shouldn't set default values without queue name": unmarked templates."""
    bare = pod(leader_worker_set(quota=None), 0, 0)
    assert POD_GROUP_NAME_LABEL not in bare["metadata"]["labels"]


def test_a_long_lws_name_gives_a_group_label_that_fits() -> None:
    stored = marked(leader_worker_set(name="x" * 60))
    group = pod(stored, 12, 0)["metadata"]["labels"][POD_GROUP_NAME_LABEL]
    assert len(group) == 63 and group.startswith("leaderworkerset-xxx")
    assert group == pod(stored, 12, 1)["metadata"]["labels"][POD_GROUP_NAME_LABEL]
    assert group != pod(stored, 13, 0)["metadata"]["labels"][POD_GROUP_NAME_LABEL]


def test_the_pod_webhook_gates_and_labels_in_one_patch_and_again_when_reinvoked() -> None:
    stored = marked(leader_worker_set())
    fresh = pod(stored, 0, 0, gated=False)
    del fresh["metadata"]["labels"][POD_GROUP_NAME_LABEL]
    del fresh["metadata"]["labels"][lws.LWS_GROUP_INDEX_LABEL]
    gating = PodGating(False, AdmissionGating(frozenset({"kube-system"}), frozenset()))
    ops, warnings = pod_patch(fresh, gating, "ns")
    after = jsonpatch.apply_patch(fresh, ops)
    assert after["metadata"]["labels"][POD_GROUP_NAME_LABEL] == "leaderworkerset-lws-0"
    assert after["spec"]["schedulingGates"] == [{"name": POD_ADMISSION_GATE}]
    assert warnings == []
    assert pod_patch(after, gating, "ns") == ([], [])  # re-invoked: nothing twice
    lost = pod(stored, 0, 1, gated=False)  # a worker without its group index
    del lost["metadata"]["labels"][POD_GROUP_NAME_LABEL]
    del lost["metadata"]["labels"][lws.LWS_GROUP_INDEX_LABEL]
    ops, warnings = pod_patch(lost, gating, "ns")
    assert jsonpatch.apply_patch(lost, ops)["spec"]["schedulingGates"]  # held all the same
    assert warnings == [WARN_LWS_GROUP_MISSING]


def test_an_lws_statefulset_is_left_to_the_lws_path() -> None:
    """The LWS controller's StatefulSets carry its name label: not queued as StatefulSets."""
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "lws",
            "namespace": "ns",
            "labels": {QUOTA_NAME_LABEL: "q", lws.LWS_NAME_LABEL: "lws"},
        },
        "spec": {"replicas": 2, "template": {"spec": {"containers": [container("1")]}}},
    }
    assert review_parent(GATING, "CREATE", sts, None).patch is None
    del sts["metadata"]["labels"][lws.LWS_NAME_LABEL]
    assert review_parent(GATING, "CREATE", sts, None).patch is not None


# --- Kueue's reconciler: one unit per group, its pod sets -----------------------------------------
def test_a_worker_only_group_is_main_of_size() -> None:
    """Kueue's "should create prebuilt workload": one pod set main of size."""
    stored = marked(leader_worker_set(size=2, leader_cpu=None, worker_cpu="500m"))
    members = group_pods(stored, 0)
    assert POD.expected_members(members[:1]) == 2  # waits for the whole group
    assert [(p.name, p.count) for p in POD.pod_sets(members)] == [("main", 2)]
    assert POD.resource(members) == Resources.parse({"cpu": "1"})


def test_a_group_with_a_leader_is_leader_one_and_workers_size_minus_one() -> None:
    """Kueue's "should create prebuilt workload with leader template": leader 1, worker 2."""
    stored = marked(leader_worker_set(size=3, leader_cpu="2", worker_cpu="1"))
    members = group_pods(stored, 0)
    assert [(p.name, p.count) for p in POD.pod_sets(members)] == [("leader", 1), ("worker", 2)]
    assert POD.resource(members) == Resources.parse({"cpu": "4"})
    owners = [(r["kind"], r["name"]) for r in POD.owner_references(members)]
    assert ("StatefulSet", "lws") in owners  # the leader's StatefulSet (the LWS owns it)


def test_requests_in_limits_only_count_as_requests() -> None:
    stored = marked(leader_worker_set(size=2, leader_cpu=None))
    members = group_pods(stored, 0)
    for member in members:
        resources = member["spec"]["containers"][0]["resources"]
        resources["limits"], resources["requests"] = {"cpu": "3"}, {}
    assert POD.resource(members) == Resources.parse({"cpu": "6"})


def test_an_unknown_role_is_named() -> None:
    stored = marked(leader_worker_set(size=2))
    members = group_pods(stored, 0)
    members[1]["metadata"]["annotations"][POD_GROUP_ROLE_ANNOTATION] = "coordinator"
    with pytest.raises(InvalidJobError) as caught:
        POD.pod_sets(members)
    assert caught.value.field == f"metadata.annotations[{POD_GROUP_ROLE_ANNOTATION}]"
    assert "'coordinator': not one of leader, main, worker" in str(caught.value)


def test_main_and_leader_in_one_group_are_refused() -> None:
    stored = marked(leader_worker_set(size=2))
    members = group_pods(stored, 0)
    members[1]["metadata"]["annotations"][POD_GROUP_ROLE_ANNOTATION] = "main"
    with pytest.raises(InvalidJobError, match="different versions"):
        POD.pod_sets(members)


def test_an_lws_pod_without_its_group_gets_no_unit_of_its_own() -> None:
    """A pod that names its role but no group (its group index unknown) is not queued alone
    with a wrong request: it is refused, naming the missing label."""
    stored = marked(leader_worker_set(size=2))
    lone = pod(stored, 0, 1)
    del lone["metadata"]["labels"][POD_GROUP_NAME_LABEL]
    with pytest.raises(InvalidJobError) as caught:
        POD.pod_sets([lone])
    assert caught.value.field == f"metadata.labels[{POD_GROUP_NAME_LABEL}]"
    s = Served(POD)
    s.event("ADDED", s.put(lone))
    assert s.api.list_objects(QUEUE_UNIT) == []
    (event,) = [e for e in s.api.events if e["reason"] == REASON_INVALID_JOB]
    assert POD_GROUP_NAME_LABEL in event["message"]


def test_each_group_is_its_own_unit_admitted_whole_and_a_scale_down_gives_it_back() -> None:
    """Kueue's "should create prebuilt workloads with leader template" (2 groups, 2 units)
    and its scale-down (the group gone, its unit deleted), on the in-memory API. Each unit is
    made once its group's 3 pods exist; once admitted they are let go, and a pod replaced
    while admitted too (late member)."""
    stored = marked(leader_worker_set(replicas=2, size=3))
    s = Served(POD)
    for group in (0, 1):
        for member in group_pods(stored, group)[:2]:
            s.event("ADDED", s.put(member))
    assert s.api.list_objects(QUEUE_UNIT) == []  # each group waits for its third pod
    for group in (0, 1):
        s.event("ADDED", s.put(pod(stored, group, 2)))
    for group in (0, 1):
        unit = s.unit(f"leaderworkerset-lws-{group}-pod-qu", "ns")
        assert unit["spec"]["resource"] == {"cpu": "4"}
        assert [(p["name"], p["count"]) for p in unit["spec"]["podSet"]] == [
            ("leader", 1),
            ("worker", 2),
        ]

    s.set_phase("leaderworkerset-lws-1-pod-qu", "ns", Phase.DEQUEUED)
    s.event("MODIFIED", s.current("lws-1", "ns"))
    for name in ("lws-1", "lws-1-1", "lws-1-2"):
        assert not s.current(name, "ns")["spec"].get("schedulingGates"), name
    assert s.current("lws-0", "ns")["spec"]["schedulingGates"]  # group 0 still held
    gone = s.current("lws-1-2", "ns")
    s.api.delete(POD_KIND, "lws-1-2", "ns")
    s.event("DELETED", gone)
    s.event("ADDED", s.put(pod(stored, 1, 2)))  # remade: let go, its group admitted
    assert not s.current("lws-1-2", "ns")["spec"].get("schedulingGates")

    # scaled down to 1 group: group 1's pods go, and with the last one its unit
    for name in ("lws-1", "lws-1-1", "lws-1-2"):
        gone = s.current(name, "ns")
        s.api.delete(POD_KIND, name, "ns")
        s.event("DELETED", gone)
    assert s.api.get(QUEUE_UNIT, "leaderworkerset-lws-1-pod-qu", "ns") is None
    assert s.api.get(QUEUE_UNIT, "leaderworkerset-lws-0-pod-qu", "ns") is not None


def test_a_preempted_group_is_held_again() -> None:
    stored = marked(leader_worker_set(size=2))
    s = Served(POD)
    for member in group_pods(stored, 0):
        s.event("ADDED", s.put(member))
    s.set_phase("leaderworkerset-lws-0-pod-qu", "ns", Phase.DEQUEUED)
    s.event("MODIFIED", s.current("lws-0", "ns"))
    assert not s.current("lws-0-1", "ns")["spec"].get("schedulingGates")
    assert s.run(s.rec.suspend(s.unit("leaderworkerset-lws-0-pod-qu", "ns")))
    assert s.api.get(POD_KIND, "lws-0", "ns") is None  # released pods cannot be gated again
    assert s.api.get(POD_KIND, "lws-0-1", "ns") is None


# --- --integrations and the webhook route ---------------------------------------------------------
def test_the_integration_name_is_kueues_and_enables_the_pod_path() -> None:
    name = "leaderworkerset.x-k8s.io/leaderworkerset"
    assert parse_integrations(name) == (POD,)
    assert integration_names(f"batch/job,{name}") == ["batch/job", name]

    class NoApi:
        def list_objects(self, *_: Any, **__: Any) -> list[dict[str, Any]]:
            return []

    routes = webhook_routes(
        ControllerSettings(integrations=name), NoApi(), controller=True  # type: ignore[arg-type]
    )
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE", "object": leader_worker_set()},
    }
    answer = asyncio.run(routes[webhook.PATH](review))
    assert answer["response"]["allowed"] and answer["response"]["patch"]
    assert "mutate-pods" in routes


# --- the vendored CRD serves what is read ---------------------------------------------------------
def test_the_vendored_crd_serves_the_fields_read() -> None:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # 1.3 MB
    crd = yaml.load(CRD_FILE.read_text(), Loader=loader)
    assert crd["metadata"]["name"] == "leaderworkersets.leaderworkerset.x-k8s.io"
    assert (crd["spec"]["group"], crd["spec"]["names"]["kind"]) == (
        lws.LWS_KIND.group,
        lws.LWS_KIND.kind,
    )
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == lws.LWS_KIND.version]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    templates = spec["leaderWorkerTemplate"]["properties"]
    assert templates["size"]["type"] == "integer"
    for field in ("leaderTemplate", "workerTemplate"):
        assert {"metadata", "spec"} <= set(templates[field]["properties"])
    assert spec["replicas"]["type"] == "integer"
    assert json.dumps(spec["startupPolicy"]).count("LeaderReady") >= 1


@given(
    size=st.integers(min_value=1, max_value=64),
    leader=st.one_of(st.none(), st.integers(1, 16_000)),
    worker=st.integers(1, 16_000),
)
def test_a_groups_unit_is_the_sum_of_count_times_request(
    size: int, leader: int | None, worker: int
) -> None:
    """Hypothesis: for any size and requests, a group's unit holds the sum over its pod sets
    of count x per-pod request (leader + (size - 1) x worker, or size x worker)."""
    stored = marked(
        leader_worker_set(
            size=size,
            leader_cpu=None if leader is None else f"{leader}m",
            worker_cpu=f"{worker}m",
        )
    )
    members = group_pods(stored, 0)
    expected = worker * size if leader is None else leader + worker * (size - 1)
    assert POD.resource(members) == Resources.parse({"cpu": f"{expected}m"})
    total = Resources()
    for pod_set in POD.pod_sets(members):
        total = total + pod_set.request * pod_set.count
    assert POD.resource(members) == total


# --- simulate and explain take a LeaderWorkerSet ----------------------------------------------
SCENARIO = """
name: lws
quotas:
  - {name: team-a, max: {cpu: "4"}}
units:
  - workload:
      apiVersion: leaderworkerset.x-k8s.io/v1
      kind: LeaderWorkerSet
      metadata:
        name: infer
        labels: {quota.scheduling.koordinator.sh/name: team-a}
      spec:
        replicas: 2
        leaderWorkerTemplate:
          size: SIZE
          leaderTemplate:
            spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]}
          workerTemplate:
            spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
"""


def test_simulate_queues_each_group_of_an_lws_manifest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One unit per group, as the controller makes them: room for one group of 4 cpu."""
    path = tmp_path / "lws.yaml"
    path.write_text(SCENARIO.replace("SIZE", "3"), encoding="utf-8")
    result = run(capsys, "simulate", str(path))
    assert result.code == 0, result.err
    assert "default/leaderworkerset-infer-0-pod-qu   Dequeued" in result.out
    assert "default/leaderworkerset-infer-1-pod-qu   Enqueued" in result.out
    by_leader = run(capsys, "explain", "--scenario", str(path), "lws/infer-1", "-o", "json")
    by_unit = run(
        capsys, "explain", "--scenario", str(path), "leaderworkerset-infer-1-pod-qu", "-o", "json"
    )
    assert by_leader.code == 0, by_leader.err
    assert by_leader.out == by_unit.out and '"QuotaExceeded"' in by_unit.out
    by_flag = run(
        capsys, "explain", "--scenario", str(path), "--kind", lws.LWS_INTEGRATION, "infer-0"
    )
    assert by_flag.code == 0 and "leaderworkerset-infer-0-pod-qu" in by_flag.out


def test_simulate_names_a_bad_lws_size(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "lws.yaml"
    path.write_text(SCENARIO.replace("SIZE", "0"), encoding="utf-8")
    result = run(capsys, "simulate", str(path))
    assert result.code == 2
    assert "units[0].workload" in result.err and "spec.leaderWorkerTemplate.size" in result.err


def test_a_missing_lws_crd_is_one_log_line_and_the_pod_path_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--integrations ...,leaderworkerset.x-k8s.io/leaderworkerset` on a cluster without the
    CRD: one log line naming it, no crash, the pod path served (LWS objects created after the
    CRD is installed are marked by the webhook as usual)."""
    old_config = structlog.get_config()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )
    monkeypatch.setattr(controller_integrations, "log", structlog.get_logger("t"))
    names = f"batch/job,{lws.LWS_INTEGRATION}"
    api = MemoryApi()
    with capture_logs() as logs:
        missing = controller_integrations.missing_parent_crds(api, names)
        enabled = controller_integrations.enabled_integrations(api, names)
    structlog.configure(**old_config)
    assert missing == [lws.LWS_INTEGRATION] and POD in enabled
    (line,) = [entry for entry in logs if "CRD is not installed" in entry["event"]]
    assert line["crd"] == "leaderworkersets.leaderworkerset.x-k8s.io"
    api.create(CRD, crd("leaderworkersets", "leaderworkerset.x-k8s.io", "v1"))
    assert controller_integrations.missing_parent_crds(api, names) == []
