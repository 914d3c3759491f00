"""Plain pods and pod groups: the gate, group size, role pod sets, state and owners.

Cases transcribed from kubernetes-sigs/kueue pkg/controller/jobs/pod/pod_controller_test.go
(TestPodsReady, TestPodSets) and pod_controller.go's Finished(); each test names its case.
"""

from __future__ import annotations

import pytest

from koordqueue.domain.integrations import POD, DeleteWorkload, InvalidJobError, JobStatus
from koordqueue.domain.integrations.base import WorkloadPatch, queue_unit_for
from koordqueue.domain.integrations.pod import role_hash
from koordqueue.domain.resources import Resources
from tests.unit.integrations.helpers import pod


def test_single_pod_is_one_pod_set_main_of_one() -> None:
    """kueue TestPodSets "no annotations": one pod set "main", count 1, the pod's spec."""
    single = pod("pod", cpu="500m")
    (pod_set,) = POD.pod_sets([single])
    assert (pod_set.name, pod_set.count) == ("main", 1)
    assert pod_set.template == {"spec": single["spec"]}
    assert pod_set.request == Resources.parse({"cpu": "500m"})


def test_group_pod_sets_are_one_per_role_sorted_by_hash() -> None:
    """kueue constructGroupPodSets: pods with the same admission shape share a pod set."""
    members = [
        pod("a", group="g", total="3", cpu="1"),
        pod("b", group="g", total="3", cpu="2"),
        pod("c", group="g", total="3", cpu="1"),
    ]
    pod_sets = POD.pod_sets(members)
    assert sorted((ps.count, str(ps.request)) for ps in pod_sets) == sorted(
        [(2, str(Resources.parse({"cpu": "1"}))), (1, str(Resources.parse({"cpu": "2"})))]
    )
    assert [ps.name for ps in pod_sets] == sorted(ps.name for ps in pod_sets)
    assert POD.resource(members) == Resources.parse({"cpu": "4"})


def test_failed_members_do_not_count_in_the_group_pod_sets() -> None:
    """kueue isPodRunnableOrSucceeded: a Failed pod is left out; a Succeeded one counts."""
    members = [
        pod("a", group="g", total="2", phase="Failed", gated=False),
        pod("b", group="g", total="2", phase="Succeeded", gated=False),
        pod("c", group="g", total="2"),
    ]
    assert sum(ps.count for ps in POD.pod_sets(members)) == 2


def test_role_hash_ignores_what_admission_does_not_look_at() -> None:
    first, second = pod("a")["spec"], pod("b", extra_gates=["other"])["spec"]
    second["containers"][0]["image"] = "other-image"
    assert role_hash(first) == role_hash(second)
    assert role_hash(first) != role_hash(pod("c", cpu="3")["spec"])
    assert len(role_hash(first)) == 8


def test_group_size_comes_from_the_total_count_annotation() -> None:
    assert POD.expected_members([pod("a", group="g", total="4")]) == 4
    assert POD.expected_members([pod("a")]) == 1
    with pytest.raises(InvalidJobError, match="pod-group-total-count"):
        POD.expected_members([pod("a", group="g")])
    with pytest.raises(InvalidJobError, match="at least 1"):
        POD.expected_members([pod("a", group="g", total="0")])


def test_gate_marks_a_pod_held_and_managed() -> None:
    assert POD.is_suspended(pod("a")) and POD.is_managed(pod("a"))
    assert not POD.is_suspended(pod("a", gated=False))
    assert not POD.is_managed(pod("a", gated=False))


def test_resume_removes_only_our_gate_guarded_by_resource_version() -> None:
    held = pod("a", extra_gates=["someone-else"])
    (patch,) = POD.resume(held, "now")
    assert patch == WorkloadPatch(
        {
            "spec": {"schedulingGates": [{"name": "someone-else"}]},
            "metadata": {
                "annotations": {"koord-queue/job-dequeue-timestamp": "now"},
                "resourceVersion": "1",
            },
        }
    )
    (only_ours,) = POD.resume(pod("b"), "now")
    assert isinstance(only_ours, WorkloadPatch)
    assert only_ours.body["spec"] == {"schedulingGates": None}
    assert POD.resume(pod("c", gated=False), "now") == ()


def test_suspending_a_released_pod_deletes_it() -> None:
    """kueue Pod.Stop: a pod let go cannot be gated again; it is deleted."""
    assert POD.suspend(pod("a", gated=False, phase="Running")) == (DeleteWorkload(),)
    assert POD.suspend(pod("b")) == ()
    assert POD.suspend(pod("c", gated=False, phase="Succeeded")) == ()


@pytest.mark.parametrize(
    ("phase", "gated", "expected"),
    [
        ("Succeeded", False, JobStatus.SUCCEEDED),
        ("Failed", False, JobStatus.FAILED),
        ("Running", False, JobStatus.RUNNING),
        ("Pending", True, JobStatus.QUEUING),
        ("Pending", False, JobStatus.PENDING),
    ],
)
def test_single_pod_state_from_its_phase(phase: str, gated: bool, expected: JobStatus) -> None:
    """kueue Pod.Finished() for a single pod: terminated; success = phase Succeeded."""
    assert POD.status([pod("a", phase=phase, gated=gated)]) is expected


def test_group_succeeds_when_all_of_its_pods_succeeded() -> None:
    """kueue Pod.Finished(): succeededCount == groupTotalCount."""
    done = [pod(n, group="g", total="2", phase="Succeeded", gated=False) for n in "ab"]
    assert POD.status(done) is JobStatus.SUCCEEDED
    half = [done[0], pod("b", group="g", total="2", phase="Running", gated=False)]
    assert POD.status(half) is JobStatus.RUNNING


def test_group_with_a_failed_pod_waits_for_a_replacement_unless_unretriable() -> None:
    """kueue Pod.Finished(): a failed member ends the group only when the group is
    unretriable (retriable-in-group "false") and no member is active."""
    members = [
        pod("a", group="g", total="2", phase="Succeeded", gated=False),
        pod("b", group="g", total="2", phase="Failed", gated=False),
    ]
    assert POD.status(members) is JobStatus.PENDING
    unretriable = {"koord-queue/retriable-in-group": "false"}
    members[1] = pod(
        "b", group="g", total="2", phase="Failed", gated=False, annotations=unretriable
    )
    assert POD.status(members) is JobStatus.FAILED


def test_group_unit_is_named_after_the_group_and_owned_by_every_member() -> None:
    members = [pod("b", group="train", total="2"), pod("a", group="train", total="2")]
    unit = queue_unit_for(POD, members)
    assert unit["metadata"]["name"] == "train-pod-qu"
    assert unit["spec"]["consumerRef"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "train",
        "namespace": "ns",
    }
    owners = unit["metadata"]["ownerReferences"]
    assert [o["name"] for o in owners] == ["a", "b"]
    assert all("controller" not in o for o in owners)
    assert unit["spec"]["resource"] == {"cpu": "2"}


def test_single_pod_unit_is_named_after_the_pod_and_controlled_by_it() -> None:
    unit = queue_unit_for(POD, [pod("solo", priority_class="high")], {"high": 50}.get)
    assert unit["metadata"]["name"] == "solo-pod-qu"
    assert unit["spec"]["consumerRef"]["uid"] == "uid-solo"
    assert unit["spec"]["priority"] == 50
    assert unit["spec"]["priorityClassName"] == "high"
    (owner,) = unit["metadata"]["ownerReferences"]
    assert owner["controller"] is True


def test_only_gated_or_released_pods_may_be_queued() -> None:
    """Any other pod is skipped without a look at the API (pods are many)."""
    assert POD.may_be_queued(pod("a"))
    released = pod("b", gated=False, annotations={"koord-queue/job-dequeue-timestamp": "t"})
    assert POD.may_be_queued(released)
    assert not POD.may_be_queued(pod("c", gated=False))
