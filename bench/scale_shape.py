"""bench_scale's shape: Kueue's scalability baseline, its job plan and the objects both peers get.

Pure (no API calls): see bench_scale.py for what the shape is and where it comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from bench.bench_peers import cluster_queue
from koordqueue.domain.names import QUOTA_IS_PARENT_LABEL

PRIORITY_CLASS_PREFIX = "bench-scale-"


# --------------------------------------------------------------------------- the shape


@dataclass(frozen=True)
class JobClass:
    """One job stream per queue: `count` Jobs, one every `interval_s`, each `cpu` for `run_s`."""

    name: str
    count: int
    interval_s: float
    run_s: float
    priority: int
    cpu: int


@dataclass(frozen=True)
class Shape:
    cohorts: int
    queues: int  # child quotas (ClusterQueues) per cohort
    nominal_cpu: int
    borrowing_cpu: int
    classes: tuple[JobClass, ...]

    @property
    def capacity_cpu(self) -> int:
        """The children's total nominal quota (Kueue's usage denominator)."""
        return self.cohorts * self.queues * self.nominal_cpu

    @property
    def jobs(self) -> int:
        return self.cohorts * self.queues * sum(c.count for c in self.classes)


KUEUE_BASELINE = Shape(
    cohorts=5,
    queues=6,
    nominal_cpu=20,
    borrowing_cpu=100,
    classes=(
        JobClass("small", 350, 0.1, 0.2, 50, 1),
        JobClass("medium", 100, 0.5, 0.5, 100, 5),
        JobClass("large", 50, 1.2, 1.0, 200, 20),
    ),
)


def scaled(shape: Shape, scale: float) -> Shape:
    """The same queues and streams with `scale` x the Jobs per stream (at least one each)."""
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    classes = tuple(replace(c, count=max(1, round(c.count * scale))) for c in shape.classes)
    return replace(shape, classes=classes)


def cohort_name(c: int) -> str:
    return f"cohort-{c}"


def queue_name(c: int, q: int) -> str:
    """A child quota, ClusterQueue, LocalQueue and namespace (Kueue: cq-<set>-<i>-<cohort>)."""
    return f"cq-0-{q}-{cohort_name(c)}"


@dataclass(frozen=True)
class PlannedJob:
    namespace: str  # = the child quota / queue name
    cohort: str
    name: str
    klass: str
    due_s: float  # creation time, seconds after the start
    run_s: float
    cpu: int
    priority: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def plan(shape: Shape) -> list[PlannedJob]:
    """Every Job of the shape with its creation time, in creation order (ties by key)."""
    jobs = []
    for c in range(shape.cohorts):
        for q in range(shape.queues):
            ns = queue_name(c, q)
            for set_index, jc in enumerate(shape.classes):
                for k in range(jc.count):
                    jobs.append(
                        PlannedJob(
                            namespace=ns,
                            cohort=cohort_name(c),
                            name=f"{jc.name}-{set_index}-{k}-0",
                            klass=jc.name,
                            due_s=round(jc.interval_s * (k + 1), 6),
                            run_s=jc.run_s,
                            cpu=jc.cpu,
                            priority=jc.priority,
                        )
                    )
    jobs.sort(key=lambda j: (j.due_s, j.key))
    return jobs


def complete_status(now: datetime) -> dict[str, Any]:
    """The status a Job's finished pods would leave (what the API server accepts as Complete)."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    done = {"status": "True", "lastTransitionTime": stamp, "lastProbeTime": stamp,
            "reason": "CompletionsReached", "message": "done by bench_scale"}  # fmt: skip
    return {
        "status": {
            "startTime": stamp,
            "completionTime": stamp,
            "succeeded": 1,
            "conditions": [{"type": "SuccessCriteriaMet", **done}, {"type": "Complete", **done}],
        }
    }


def is_complete(job: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


# --------------------------------------------------------------------------- objects


def priority_class(jc: JobClass) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": PRIORITY_CLASS_PREFIX + jc.name},
        "value": jc.priority,
        "globalDefault": False,
    }


def job_body(job: PlannedJob) -> dict[str, Any]:
    """A suspended one-pod Job asking `cpu` (cpu only: the quotas cover only cpu), koordqueue's."""
    from tests.e2e import kq

    body = kq.job(job.name, job.namespace, job.namespace, cpu=str(job.cpu),
                  priority_class=PRIORITY_CLASS_PREFIX + job.klass)  # fmt: skip
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].pop("memory")
    return body


def parent_quota(shape: Shape, c: int) -> dict[str, Any]:
    from tests.e2e import kq

    total = str(shape.queues * shape.nominal_cpu)
    return kq.quota(cohort_name(c), "default", max_={"cpu": total}, min_={"cpu": total},
                    labels={QUOTA_IS_PARENT_LABEL: "true"})  # fmt: skip


def child_quota(shape: Shape, c: int, q: int) -> dict[str, Any]:
    from tests.e2e import kq

    return kq.quota(
        queue_name(c, q),
        queue_name(c, q),
        max_={"cpu": str(shape.nominal_cpu + shape.borrowing_cpu)},
        min_={"cpu": str(shape.nominal_cpu)},
        parent=cohort_name(c),
    )


def kueue_cluster_queue(shape: Shape, c: int, q: int, preemption: bool) -> dict[str, Any]:
    """bench_peers' ClusterQueue, cpu only, in its cohort with the shape's borrowing limit."""
    cq = cluster_queue(queue_name(c, q), str(shape.nominal_cpu), "0")
    group = cq["spec"]["resourceGroups"][0]
    group["coveredResources"] = ["cpu"]
    group["flavors"][0]["resources"] = [
        {"name": "cpu", "nominalQuota": str(shape.nominal_cpu),
         "borrowingLimit": str(shape.borrowing_cpu)}
    ]  # fmt: skip
    cq["spec"]["cohortName"] = cohort_name(c)
    if preemption:
        cq["spec"]["preemption"] = {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
        }
    return cq
