"""A LeaderWorkerSet queued group by group, on the real API server (issue 26).

The LWS CRD (vendored from sigs.k8s.io/lws v0.8.0) is installed with the session's vendored
CRDs; the controller runs
in-process with `--integrations batch/job,leaderworkerset.x-k8s.io/leaderworkerset` and serves
the pod and pod-parent webhooks, which the real kube-apiserver calls over loopback. No LWS
controller (and no kube-controller-manager) runs here, so the test makes what the LWS
controller would: the leader StatefulSet (owned by the LWS), each group's leader pod and its
workers' StatefulSet (owned by the leader pod) and worker pods, from the stored
(webhook-marked) templates, with the LWS's labels. The first leader has no group-index
label (as before the LWS's own pod webhook sets it): its group comes from its name.

What kubectl shows: both templates marked; every pod gated and labelled with its group; one
unit per group (leader 1 x 2 cpu + worker 2 x 1 cpu = 4 cpu), only one admitted on a 4-cpu
quota (`Admitted` event), its pods ungated; its unit follows its pods to Running and
Succeed, giving the quota back to the other group, admitted and ungated in turn; that group,
preempted by an urgent Job, has its pods deleted and, made again, held (unit Enqueued,
`Preempted` event); scaled down (its pods deleted), its unit is gone; a request change on
the LWS is refused naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain.integrations import leaderworkerset as lws
from koordqueue.domain.names import (
    POD_ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_ROLE_ANNOTATION,
    QUOTA_NAME_LABEL,
)
from tests.e2e import kq
from tests.e2e.pod_parent_webhooks import serving_pod_parents
from tests.e2e.test_gates_admission import (
    gates_of,
    live_gates,
)

QU = "queueunits.scheduling.x-k8s.io"
LWS_RESOURCE = "leaderworkersets.leaderworkerset.x-k8s.io"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def served(
    kubectl: Any,
    kubeconfig: Path,
    tmp_path_factory: pytest.TempPathFactory,
    integration_crds: list[str],
) -> Iterator[str]:
    """A namespace whose pods and LeaderWorkerSets go through our webhooks (the LWS CRD is
    one of the session's vendored CRDs, installed and served: conftest.integration_crds)."""
    assert LWS_RESOURCE in integration_crds
    rule = {"apiGroups": [lws.LWS_KIND.group], "apiVersions": [lws.LWS_KIND.version],
            "resources": [lws.LWS_KIND.plural]}
    with serving_pod_parents(
        kubectl, kubeconfig, tmp_path_factory.mktemp("certs"), prefix="lws",
        integrations=f"batch/job,{lws.LWS_INTEGRATION}", rule=rule,
    ) as ns:
        yield ns


def _spec(cpu: str) -> Obj:
    return {
        "restartPolicy": "Always",  # (a StatefulSet's pods, as LWS makes them)
        "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
        ],
    }


def _create(kubectl: Any, obj: Obj) -> Obj:
    made: Obj = json.loads(kubectl("create", "-o", "json", "-f", "-", input=json.dumps(obj)).stdout)
    return made


def _owner(obj: Obj) -> Obj:
    m = obj["metadata"]
    api_version = obj.get("apiVersion") or "v1"
    return {
        "apiVersion": api_version,
        "kind": obj["kind"],
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _sts(name: str, ns: str, owner: Obj, labels: dict[str, str], replicas: int) -> Obj:
    """A StatefulSet as the LWS controller applies it (its own labels only)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _spec("1")},
        },
    }


def make_group(kubectl: Any, stored: Obj, leader_sts: Obj, group: int) -> list[str]:
    """The group's pods as the LWS controller makes them; returns their names."""
    name, ns = stored["metadata"]["name"], stored["metadata"]["namespace"]
    templates = stored["spec"]["leaderWorkerTemplate"]
    size = int(templates["size"])

    def pod(pod_name: str, field: str, labels: dict[str, str], owner: Obj) -> Obj:
        template = templates[field]
        return _create(
            kubectl,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "namespace": ns,
                    "labels": {**template["metadata"].get("labels", {}), **labels},
                    "annotations": {
                        **template["metadata"].get("annotations", {}),
                        "leaderworkerset.sigs.k8s.io/size": str(size),
                    },
                    "ownerReferences": [owner],
                },
                "spec": template["spec"],
            },
        )

    leader_labels = {lws.LWS_NAME_LABEL: name, lws.LWS_WORKER_INDEX_LABEL: "0"}
    if group > 0:  # the first one has none yet: its group comes from its name
        leader_labels[lws.LWS_GROUP_INDEX_LABEL] = str(group)
    leader = pod(f"{name}-{group}", "leaderTemplate", leader_labels, _owner(leader_sts))
    assert gates_of(leader) == [POD_ADMISSION_GATE]
    group_labels = {lws.LWS_NAME_LABEL: name, lws.LWS_GROUP_INDEX_LABEL: str(group)}
    workers = _create(kubectl, _sts(f"{name}-{group}", ns, _owner(leader), group_labels, size - 1))
    names = [leader["metadata"]["name"]]
    for worker in range(1, size):
        labels = {**group_labels, lws.LWS_WORKER_INDEX_LABEL: str(worker)}
        made = pod(f"{name}-{group}-{worker}", "workerTemplate", labels, _owner(workers))
        assert gates_of(made) == [POD_ADMISSION_GATE]
        names.append(made["metadata"]["name"])
    return names


def group_of(kubectl: Any, ns: str, pod: str) -> str | None:
    found = kq.get(kubectl, "pod", pod, ns) or {}
    value = ((found.get("metadata") or {}).get("labels") or {}).get(POD_GROUP_NAME_LABEL)
    return None if value is None else str(value)


def wait_phase(kubectl: Any, ns: str, unit: str, *phases: str) -> None:
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, unit) in phases,
        what=f"{unit} {'/'.join(phases)}",
        state=lambda: kq.get(kubectl, QU, unit, ns),
    )


def set_phase(kubectl: Any, ns: str, pods: list[str], phase: str) -> None:
    """What the kubelet would write (no node runs here)."""
    for pod in pods:
        body = json.dumps({"status": {"phase": phase}})
        kubectl("patch", "pod", pod, "-n", ns, "--subresource=status", "--type=merge", "-p", body)


def test_each_group_is_queued_admitted_released_preempted_and_scaled_down(
    kubectl: Any, served: str
) -> None:
    ns = served
    quota = kq.unique("lws")
    kubectl.apply(
        kq.quota(
            quota,
            max_={"cpu": "4", "memory": "4Gi"},  # room for one group
            annotations={
                "koord-queue/wait-for-pods-running": "true",
                "koord-queue/enable-queueunit-preemption": "true",
            },
        )
    )
    made = _create(
        kubectl,
        {
            "apiVersion": lws.LWS_KIND.api_version,
            "kind": lws.LWS_KIND.kind,
            "metadata": {"name": "infer", "namespace": ns, "labels": {QUOTA_NAME_LABEL: quota}},
            "spec": {
                "replicas": 2,
                "leaderWorkerTemplate": {
                    "size": 3,
                    "leaderTemplate": {"spec": _spec("2")},
                    "workerTemplate": {"spec": _spec("1")},
                },
            },
        },
    )
    templates = made["spec"]["leaderWorkerTemplate"]
    assert templates["leaderTemplate"]["metadata"]["labels"][QUOTA_NAME_LABEL] == quota
    assert templates["leaderTemplate"]["metadata"]["annotations"][POD_GROUP_ROLE_ANNOTATION] == (
        "leader"
    )
    assert templates["workerTemplate"]["metadata"]["annotations"][POD_GROUP_ROLE_ANNOTATION] == (
        "worker"
    )
    refused = kubectl(
        "patch", LWS_RESOURCE, "infer", "-n", ns, "--type=merge", "-p",
        json.dumps({"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": _spec("3")}}}}),
        check=False,
    )
    assert refused.returncode != 0
    assert (
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.requests: "
        "field is immutable"
    ) in refused.stderr

    leader_sts = _create(
        kubectl,
        _sts("infer", ns, _owner(made), {lws.LWS_NAME_LABEL: "infer", "role": "leader"}, 2),
    )
    groups = {g: make_group(kubectl, made, leader_sts, g) for g in (0, 1)}
    for g, pods in groups.items():
        assert {group_of(kubectl, ns, p) for p in pods} == {f"leaderworkerset-infer-{g}"}
    units = {g: f"leaderworkerset-infer-{g}-pod-qu" for g in groups}
    for g in groups:
        unit = kq.wait_for(lambda g=g: kq.get(kubectl, QU, units[g], ns), what=f"unit {g}")
        assert unit["spec"]["resource"] == {"cpu": "4"}
        assert [(p["name"], p["count"]) for p in unit["spec"]["podSet"]] == [
            ("leader", 1),
            ("worker", 2),
        ]
        assert ("StatefulSet", "infer") in [
            (r["kind"], r["name"]) for r in unit["metadata"]["ownerReferences"]
        ]

    # one group fits: it is admitted and its pods let go; the other waits, gated
    kq.wait_for(
        lambda: any(kq.phase(kubectl, ns, u) == "Dequeued" for u in units.values()),
        what="a group admitted",
    )
    first = next(g for g, u in units.items() if kq.phase(kubectl, ns, u) == "Dequeued")
    second = 1 - first
    events = kq.wait_for(
        lambda: kq.events_for(kubectl, ns, units[first], "Admitted"), what="Admitted event"
    )
    assert quota in events[0]["message"]
    for pod in groups[first]:
        kq.wait_for(lambda p=pod: live_gates(kubectl, ns, p) == [], what=f"{pod} ungated")
    wait_phase(kubectl, ns, units[second], "Enqueued")
    assert all(live_gates(kubectl, ns, p) == [POD_ADMISSION_GATE] for p in groups[second])

    # its unit follows its pods: Running, then Succeed, which gives the quota back
    set_phase(kubectl, ns, groups[first], "Running")
    wait_phase(kubectl, ns, units[first], "Running")
    set_phase(kubectl, ns, groups[first], "Succeeded")
    wait_phase(kubectl, ns, units[first], "Succeed")
    wait_phase(kubectl, ns, units[second], "Dequeued")
    for pod in groups[second]:
        kq.wait_for(lambda p=pod: live_gates(kubectl, ns, p) == [], what=f"{pod} ungated")

    # preempted (admitted, not running) by an urgent Job: its pods go, and made again they
    # are held
    pc = kq.unique("urgent-pc")
    kubectl.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 1000,
        }
    )
    kubectl.apply(kq.job("urgent", ns, quota, cpu="4", memory="1Gi", priority_class=pc))
    wait_phase(kubectl, ns, "urgent", "Dequeued")
    events = kq.wait_for(
        lambda: kq.events_for(kubectl, ns, units[second], "Preempted"), what="Preempted event"
    )
    assert events[0]["message"] == f"preempted by {ns}/urgent; back in queue"
    for pod in groups[second]:
        kq.wait_for(lambda p=pod: kq.get(kubectl, "pod", p, ns) is None, what=f"{pod} deleted")
    kubectl("delete", "statefulset", f"infer-{second}", "-n", ns)  # (GC would: its leader went)
    again = make_group(kubectl, made, leader_sts, second)
    wait_phase(kubectl, ns, units[second], "Enqueued")
    assert all(live_gates(kubectl, ns, p) == [POD_ADMISSION_GATE] for p in again)

    # scaled down to one group: the group's pods go, and with the last one its unit
    kubectl("delete", "pod", *again, "-n", ns, "--wait=true")
    kq.wait_for(lambda: kq.get(kubectl, QU, units[second], ns) is None, what="unit deleted")
