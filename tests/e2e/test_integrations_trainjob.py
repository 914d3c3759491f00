"""Issue 26, Kubeflow Trainer's TrainJob on the real API server: what kubectl shows.

The vendored TrainJob and ClusterTrainingRuntime CRDs (trainer v2.2.0) are installed (with
every vendored kind, once per session) and one controller runs with `--integrations
batch/job,trainer.kubeflow.org/trainjob`. No trainer controller runs on this plane: the test
writes the TrainJob's status as it would (through the status subresource), and nothing else.

One lean test, one quota with room for one TrainJob: a TrainJob naming a runtime that does
not exist gets an InvalidJob event naming spec.runtimeRef and no unit; one whose runtime
exists gets its unit (numNodes x the runtime's trainer pod), is admitted against the quota
and released (spec.suspend false) while an identical second waits held; the first's unit
follows it to Running and Succeed, giving the quota back, so the second is admitted and
released; a higher-priority Job then preempts the second, which is suspended again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from koordqueue.domain import names
from koordqueue.domain.names import QUOTA_NAME_LABEL
from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"
TJ = "trainjobs.trainer.kubeflow.org"
RUNTIMES = "clustertrainingruntimes.trainer.kubeflow.org"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
NOW = "2026-01-01T00:00:00Z"
Obj = dict[str, Any]


def cluster_runtime(name: str) -> Obj:
    """A ClusterTrainingRuntime of one trainer Job whose `node` pod asks for 1 cpu."""
    node = {"name": "node", "image": "busybox",
            "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}
    job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {ANCESTOR: "trainer"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [node]}}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": [job]}}},
    }


def trainjob(name: str, ns: str, quota: str, runtime: str) -> Obj:
    """Held, with 2 nodes: 2 cpu."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns, "labels": {QUOTA_NAME_LABEL: quota}},
        "spec": {"suspend": True, "runtimeRef": {"name": runtime}, "trainer": {"numNodes": 2}},
    }


def write_status(kubectl: Any, ns: str, name: str, status: Obj) -> None:
    """What the trainer controller would write."""
    kubectl("patch", TJ, name, "-n", ns, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}))


def jobs_status(ready: int) -> list[Obj]:
    counts = {"active": 2, "ready": ready, "succeeded": 0, "failed": 0, "suspended": 0}
    return [{"name": "node", **counts}]


def held(kubectl: Any, ns: str, name: str) -> bool:
    return bool(((kq.get(kubectl, TJ, name, ns) or {}).get("spec") or {}).get("suspend"))


def wait_phase(kubectl: Any, ns: str, unit: str, *phases: str) -> None:
    kq.wait_for(lambda: kq.phase(kubectl, ns, unit) in phases, what=f"{unit} {phases}",
                state=lambda: kq.get(kubectl, QU, unit, ns))


def admitted(kubectl: Any, ns: str, unit: str, quota: str) -> None:
    wait_phase(kubectl, ns, unit, "Dequeued", "Running")
    assert (kq.get(kubectl, QU, unit, ns) or {})["status"]["admissions"]
    events = kq.wait_for(lambda: kq.events_for(kubectl, ns, unit, "Admitted"), what="Admitted")
    assert quota in events[0]["message"]


def test_trainjob_held_admitted_released_followed_preempted_and_refused_without_runtime(
    kubectl: Any, kubeconfig: Path, integration_crds: list[str]
) -> None:
    assert {TJ, RUNTIMES} <= set(integration_crds)  # installed once per session (conftest)
    runtime = kq.unique("torch")
    kubectl.create(cluster_runtime(runtime))
    ns = kq.namespace(kubectl, kq.unique("trainjob"))
    quota = kq.unique("tj")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "4Gi"}, annotations={
        "koord-queue/wait-for-pods-running": "true",
        "koord-queue/enable-queueunit-preemption": "true",
    }))
    with RunningController(kubeconfig, integrations="batch/job,trainer.kubeflow.org/trainjob"):
        # a runtime that is not there: a clear event, no unit, still held
        kubectl.create(trainjob("orphan", ns, quota, "no-such-runtime"))
        events = kq.wait_for(
            lambda: kq.events_for(kubectl, ns, "orphan", names.REASON_INVALID_JOB), what="event"
        )
        assert events[0]["type"] == "Warning"
        assert "spec.runtimeRef: ClusterTrainingRuntime 'no-such-runtime' not found" in (
            events[0]["message"]
        )

        kubectl.create(trainjob("first", ns, quota, runtime))
        kq.wait_for(lambda: kq.get(kubectl, QU, "first-tj-qu", ns), what="first's unit")
        spec = (kq.get(kubectl, QU, "first-tj-qu", ns) or {})["spec"]
        assert (spec["consumerRef"]["kind"], spec["consumerRef"]["name"]) == ("TrainJob", "first")
        assert spec["resource"] == {"cpu": "2", "memory": "512Mi"}  # numNodes 2 x the node pod
        assert [(p["name"], p["count"]) for p in spec["podSet"]] == [("node", 2)]
        admitted(kubectl, ns, "first-tj-qu", quota)
        kq.wait_for(lambda: not held(kubectl, ns, "first"), what="first released")

        kubectl.create(trainjob("second", ns, quota, runtime))
        wait_phase(kubectl, ns, "second-tj-qu", "Enqueued")
        write_status(kubectl, ns, "first", {"jobsStatus": jobs_status(ready=2)})
        wait_phase(kubectl, ns, "first-tj-qu", "Running")
        assert held(kubectl, ns, "second")  # the quota is the first's
        complete = {"type": "Complete", "status": "True", "reason": "JobsCompleted",
                    "message": "written by the test", "lastTransitionTime": NOW}
        write_status(kubectl, ns, "first", {"conditions": [complete]})
        wait_phase(kubectl, ns, "first-tj-qu", "Succeed")
        assert (kq.get(kubectl, QU, "first-tj-qu", ns) or {})["status"]["admissions"] == []

        admitted(kubectl, ns, "second-tj-qu", quota)  # the freed quota goes to the one waiting
        kq.wait_for(lambda: not held(kubectl, ns, "second"), what="second released")
        pc = kq.unique("urgent-pc")
        kubectl.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                       "metadata": {"name": pc}, "value": 1000})
        kubectl.apply(kq.job("urgent", ns, quota, cpu="2", memory="1Gi", priority_class=pc))
        wait_phase(kubectl, ns, "urgent", "Dequeued")
        wait_phase(kubectl, ns, "second-tj-qu", "Enqueued")
        kq.wait_for(lambda: held(kubectl, ns, "second"), what="second suspended again")
        events = kq.wait_for(
            lambda: kq.events_for(kubectl, ns, "second-tj-qu", "Preempted"), what="Preempted"
        )
        assert events[0]["message"] == f"preempted by {ns}/urgent; back in queue"
        assert kq.get(kubectl, QU, "orphan-tj-qu", ns) is None and held(kubectl, ns, "orphan")
    kubectl("delete", "clustertrainingruntime", runtime, "--wait=false")
