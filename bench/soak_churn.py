"""The soak's users and kubelet (bench/soak.py): continuous churn on the real API server.

- workloads of every integrated kind (batch/v1 Job, PyTorchJob, MPIJob, JobSet) created
  suspended on a random leaf quota; once resumed they "run" for a while, are marked finished
  in their kind's status, and are deleted a little later; some are deleted while they wait;
- quotas: a two-level tree whose leaves are edited (max), re-parented and deleted (and
  created again later);
- pods for the scheduler (`schedulerName` SCHEDULER), marked Running once bound, Succeeded a
  while later, then deleted; a pod unbound for long is deleted.

It talks to the API server directly (never through the fault proxy: it plays the users and
the kubelet, not the system under test) and keeps the work outstanding bounded, so the box
is busy but never swamped.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from koordqueue.domain.names import QUOTA_NAME_LABEL, QUOTA_PARENT_LABEL
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, NODE, POD, ApiError, Kind, KubeApi

NAMESPACE: Final = "soak"
QUOTA_NAMESPACE: Final = "default"
SCHEDULER: Final = "koordqueue-soak"
PYTORCHJOB: Final = Kind("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
MPIJOB: Final = Kind("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")
JOBSET: Final = Kind("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
INTEGRATIONS: Final = "batch/job,kubeflow.org/pytorchjob,kubeflow.org/mpijob,jobset.x-k8s.io/jobset"
PARENTS: Final = ("soak-p0", "soak-p1")
LEAVES: Final = tuple(f"soak-l{i}" for i in range(6))
NODES: Final = 6
NODE_CPU: Final = "4"
NODE_PODS: Final = "12"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container(cpu: str) -> dict[str, Any]:
    return {"name": "main", "image": "busybox", "command": ["true"],
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}


def _template(cpu: str) -> dict[str, Any]:
    return {"spec": {"restartPolicy": "Never", "containers": [_container(cpu)]}}


def _meta(name: str, quota: str) -> dict[str, Any]:
    return {"name": name, "namespace": NAMESPACE, "labels": {QUOTA_NAME_LABEL: quota}}


@dataclass(frozen=True)
class WorkloadKind:
    kind: Kind
    make: Callable[[str, str, str], dict[str, Any]]
    resumed: Callable[[dict[str, Any]], bool]


def _job(name: str, quota: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(name, quota),
            "spec": {"suspend": True, "parallelism": 1, "completions": 1,
                     "template": _template(cpu)}}


def _pytorchjob(name: str, quota: str, cpu: str) -> dict[str, Any]:
    role = {"replicas": 1, "restartPolicy": "Never", "template": _template(cpu)}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": _meta(name, quota),
            "spec": {"runPolicy": {"suspend": True},
                     "pytorchReplicaSpecs": {"Master": role, "Worker": role}}}


def _mpijob(name: str, quota: str, cpu: str) -> dict[str, Any]:
    role = {"replicas": 1, "template": _template(cpu)}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": _meta(name, quota),
            "spec": {"runPolicy": {"suspend": True},
                     "mpiReplicaSpecs": {"Launcher": role, "Worker": role}}}


def _jobset(name: str, quota: str, cpu: str) -> dict[str, Any]:
    job = {"parallelism": 1, "completions": 1, "template": _template(cpu)}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": _meta(name, quota),
            "spec": {"suspend": True,
                     "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": job}}]}}


def _condition(kind: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": kind, "message": "soak",
            "lastTransitionTime": _now(), "lastUpdateTime": _now()}


def _spec_resumed(obj: dict[str, Any]) -> bool:
    return (obj.get("spec") or {}).get("suspend") is False


def _run_policy_resumed(obj: dict[str, Any]) -> bool:
    return ((obj.get("spec") or {}).get("runPolicy") or {}).get("suspend") is False


def _job_finished() -> dict[str, Any]:
    done = {"status": "True", "lastTransitionTime": _now(), "lastProbeTime": _now(),
            "reason": "CompletionsReached", "message": "soak"}
    return {"startTime": _now(), "completionTime": _now(), "succeeded": 1,
            "conditions": [{"type": "SuccessCriteriaMet", **done}, {"type": "Complete", **done}]}


KINDS: Final = (
    WorkloadKind(JOB, _job, _spec_resumed),
    WorkloadKind(PYTORCHJOB, _pytorchjob, _run_policy_resumed),
    WorkloadKind(MPIJOB, _mpijob, _run_policy_resumed),
    WorkloadKind(JOBSET, _jobset, _spec_resumed),
)


def _finished_status(kind: WorkloadKind) -> dict[str, Any]:
    if kind.kind == JOB:
        return _job_finished()
    return {"conditions": [_condition("Completed" if kind.kind == JOBSET else "Succeeded")]}


def quota_manifest(name: str, cpu: int, parent: str | None) -> dict[str, Any]:
    labels = {QUOTA_PARENT_LABEL: parent} if parent else {}
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": QUOTA_NAMESPACE, "labels": labels},
            "spec": {"max": {"cpu": str(cpu), "memory": "1Ti"}, "min": {}}}


def node_manifests(api: KubeApi) -> None:
    for i in range(NODES):
        name = f"soak-node-{i}"
        api.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        resources = {"cpu": NODE_CPU, "memory": "32Gi", "pods": NODE_PODS}
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "soak"}
        api.merge_patch(NODE, name, {"status": {"capacity": resources,
                                                "allocatable": resources,
                                                "conditions": [ready]}}, subresource="status")
        api.merge_patch(NODE, name, {"spec": {"taints": None}})


class Churn:
    """Threads that create, finish and delete; `stop_creating()` lets the work drain."""

    def __init__(self, api: KubeApi, seed: int, *, workloads_per_s: float = 0.6,
                 pods_per_s: float = 0.6, max_outstanding: int = 80) -> None:
        self.api = api
        self.rng = random.Random(seed)
        self.workloads_per_s = workloads_per_s
        self.pods_per_s = pods_per_s
        self.max_outstanding = max_outstanding
        self.done: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._creating = threading.Event()
        self._creating.set()
        self._stop = threading.Event()
        self._seq = 0
        self._lock = threading.Lock()
        # by (plural, name): first seen, started (resumed / Running), finished
        self._seen: dict[tuple[str, str], float] = {}
        self._started: dict[tuple[str, str], float] = {}
        self._finished: dict[tuple[str, str], float] = {}
        self._runtime: dict[tuple[str, str], float] = {}
        self._deleted_quotas: dict[str, float] = {}  # leaf -> when to create it again
        self._parents = {leaf: PARENTS[i % 2] for i, leaf in enumerate(LEAVES)}
        self._threads: list[threading.Thread] = []

    # --- lifecycle -----------------------------------------------------------------------
    def setup(self) -> None:
        for parent in PARENTS:
            self.api.create(ELASTIC_QUOTA, quota_manifest(parent, 10, None), QUOTA_NAMESPACE)
        for leaf in LEAVES:
            self.api.create(ELASTIC_QUOTA, quota_manifest(leaf, self.rng.randint(3, 6),
                                                          self._parents[leaf]), QUOTA_NAMESPACE)
        node_manifests(self.api)

    def start(self) -> None:
        loops = [(self._create_workloads, "workloads"), (self._create_pods, "pods"),
                 (self._kubelet, "kubelet"), (self._quotas, "quotas")]
        self._threads = [threading.Thread(target=self._guard, args=(fn,), name=f"churn-{n}",
                                          daemon=True) for fn, n in loops]
        for thread in self._threads:
            thread.start()

    def stop_creating(self) -> None:
        self._creating.clear()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)

    def _guard(self, loop: Callable[[], None]) -> None:
        while not self._stop.is_set():
            try:
                loop()
            except Exception as exc:  # the API server restarting etc.: count, go on
                self.errors[type(exc).__name__] += 1
                self._stop.wait(0.5)

    def _name(self, prefix: str) -> str:
        with self._lock:
            self._seq += 1
            return f"{prefix}-{self._seq:06d}"

    def _pace(self, rate: float) -> None:
        self._stop.wait(self.rng.expovariate(rate) if rate > 0 else 1.0)

    # --- creators ------------------------------------------------------------------------
    def _create_workloads(self) -> None:
        self._pace(self.workloads_per_s)
        waiting = sum(1 for plural, _ in self._seen if plural != "pods")
        if not self._creating.is_set() or waiting > self.max_outstanding:
            return
        kind = self.rng.choice(KINDS)
        leaf = self.rng.choice(LEAVES)
        cpu = self.rng.choice(("250m", "500m", "1"))
        name = self._name(kind.kind.plural[:3])
        self.api.create(kind.kind, kind.make(name, leaf, cpu), NAMESPACE)
        self.done[f"created {kind.kind.kind}"] += 1

    def _create_pods(self) -> None:
        self._pace(self.pods_per_s)
        if not self._creating.is_set():
            return
        name = self._name("pod")
        cpu = self.rng.choice(("250m", "500m", "1", "1500m"))
        self.api.create(POD, {"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": name, "namespace": NAMESPACE},
                              "spec": {"schedulerName": SCHEDULER, "restartPolicy": "Never",
                                       "containers": [_container(cpu)]}}, NAMESPACE)
        self.done["created Pod"] += 1

    # --- the kubelet ---------------------------------------------------------------------
    def _kubelet(self) -> None:
        self._stop.wait(1.0)
        now = time.monotonic()
        for kind in KINDS:
            for obj in self.api.list_objects(kind.kind, NAMESPACE):
                self._tend_workload(kind, obj, now)
        for pod in self.api.list_objects(POD, NAMESPACE):
            self._tend_pod(pod, now)

    def _tend_workload(self, kind: WorkloadKind, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        key = (kind.kind.plural, name)
        seen = self._seen.setdefault(key, now)
        if key in self._finished:
            if now - self._finished[key] > 10:
                self._delete(kind.kind, name, key)
            return
        if not kind.resumed(obj):
            if now - seen > 240 and self.rng.random() < 0.5:
                self._delete(kind.kind, name, key)  # a user gives up waiting
            return
        started = self._started.setdefault(key, now)
        if now - started > self._runtime.setdefault(key, self.rng.uniform(4, 20)):
            try:
                self.api.merge_patch(kind.kind, name, {"status": _finished_status(kind)},
                                     NAMESPACE, subresource="status")
            except ApiError as exc:
                if not exc.not_found:
                    raise
            self._finished[key] = now
            self.done[f"finished {kind.kind.kind}"] += 1

    def _delete(self, kind: Kind, name: str, key: tuple[str, str]) -> None:
        self.api.delete(kind, name, NAMESPACE)
        for book in (self._seen, self._started, self._finished, self._runtime):
            book.pop(key, None)
        self.done[f"deleted {kind.kind}"] += 1

    def _tend_pod(self, pod: dict[str, Any], now: float) -> None:
        name = pod["metadata"]["name"]
        key = ("pods", name)
        phase = (pod.get("status") or {}).get("phase")
        seen = self._seen.setdefault(key, now)
        if phase in ("Succeeded", "Failed"):
            if now - self._finished.setdefault(key, now) > 5:
                self._delete(POD, name, key)
            return
        if not (pod.get("spec") or {}).get("nodeName"):
            if now - seen > 120:
                self._delete(POD, name, key)  # unschedulable for long: given up
            return
        if phase == "Pending":
            self.api.merge_patch(POD, name, {"status": {"phase": "Running", "startTime": _now()}},
                                 NAMESPACE, subresource="status")
            self._started[key] = now
            self.done["Pod bound and running"] += 1
        elif now - self._started.setdefault(key, now) > self._runtime.setdefault(
                key, self.rng.uniform(5, 20)):
            self.api.merge_patch(POD, name, {"status": {"phase": "Succeeded"}}, NAMESPACE,
                                 subresource="status")
            self._finished[key] = now
            self.done["finished Pod"] += 1

    # --- quotas --------------------------------------------------------------------------
    def _quotas(self) -> None:
        self._stop.wait(self.rng.uniform(8, 16))
        now = time.monotonic()
        with self._lock:
            for leaf, when in list(self._deleted_quotas.items()):
                if now >= when:
                    self._create_quota_again(leaf)
        if not self._creating.is_set():
            return
        live = [leaf for leaf in LEAVES if leaf not in self._deleted_quotas]
        leaf = self.rng.choice(live)
        action = self.rng.choice(("edit", "edit", "reparent", "delete"))
        if action == "edit":
            self.api.merge_patch(ELASTIC_QUOTA, leaf,
                                 {"spec": {"max": {"cpu": str(self.rng.randint(2, 7))}}},
                                 QUOTA_NAMESPACE)
        elif action == "reparent":
            self._parents[leaf] = PARENTS[1 - PARENTS.index(self._parents[leaf])]
            self.api.merge_patch(ELASTIC_QUOTA, leaf, {"metadata": {"labels": {
                QUOTA_PARENT_LABEL: self._parents[leaf]}}}, QUOTA_NAMESPACE)
        elif len(live) > 3:
            with self._lock:
                self.api.delete(ELASTIC_QUOTA, leaf, QUOTA_NAMESPACE)
                self._deleted_quotas[leaf] = now + self.rng.uniform(15, 40)
        self.done[f"quota {action}"] += 1

    def _create_quota_again(self, leaf: str) -> None:
        try:
            self.api.create(ELASTIC_QUOTA, quota_manifest(
                leaf, self.rng.randint(3, 6), self._parents[leaf]), QUOTA_NAMESPACE)
        except ApiError as exc:
            if exc.status != 409:
                raise
        del self._deleted_quotas[leaf]
        self.done["quota created again"] += 1

    def recreate_deleted_quotas(self) -> None:
        """Before the final check: every leaf exists again (units of a missing quota wait)."""
        with self._lock:
            for leaf in list(self._deleted_quotas):
                try:
                    self._create_quota_again(leaf)
                except ApiError as exc:
                    self.errors[f"quota create: {exc.status}"] += 1
