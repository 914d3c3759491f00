"""Small builders so tests read as cluster descriptions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from koordqueue.domain.quantity import MILLI_NANO
from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, SchedulerConfig, SessionResult, parse_config
from koordqueue.scheduler.api import (
    JobInfo,
    NodeInfo,
    PodGroupPhase,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)


def res(cpu: str = "0", memory: str = "0", **extra: str) -> Resources:
    """Resources with cpu/memory (zero entries dropped)."""
    raw = {"cpu": cpu, "memory": memory, **{k.replace("_", "/"): v for k, v in extra.items()}}
    return Resources.of({k: v for k, v in raw.items() if v not in ("0", "")})


def milli(amounts: dict[str, int]) -> Resources:
    """Resources from milli-unit amounts (Volcano's internal unit)."""
    return Resources({k: v * MILLI_NANO for k, v in amounts.items()})


def node(name: str, cpu: str = "4", memory: str = "8Gi", **kwargs: Any) -> NodeInfo:
    """A ready node."""
    return NodeInfo(name, res(cpu, memory), **kwargs)


def task(
    name: str,
    cpu: str = "1",
    memory: str = "1Gi",
    *,
    status: TaskStatus = TaskStatus.PENDING,
    node_name: str | None = None,
    **kwargs: Any,
) -> TaskInfo:
    """A task (pod); uid = name."""
    return TaskInfo(
        name, name, resreq=res(cpu, memory), status=status, node_name=node_name, **kwargs
    )


def running(
    name: str, node_name: str, cpu: str = "1", memory: str = "1Gi", **kwargs: Any
) -> TaskInfo:
    """A running task on a node."""
    return task(name, cpu, memory, status=TaskStatus.RUNNING, node_name=node_name, **kwargs)


def job(
    uid: str,
    tasks: Iterable[TaskInfo],
    *,
    min_available: int = 1,
    queue: str = "default",
    phase: PodGroupPhase = PodGroupPhase.INQUEUE,
    **kwargs: Any,
) -> JobInfo:
    """A PodGroup with its tasks."""
    return JobInfo(
        uid, queue=queue, min_available=min_available, phase=phase, tasks=tasks, **kwargs
    )


def snapshot(
    nodes: Sequence[NodeInfo], jobs: Sequence[JobInfo], queues: Sequence[QueueInfo] | None = None
) -> ClusterSnapshot:
    """A snapshot; the default queue exists unless queues are given."""
    return ClusterSnapshot(nodes, jobs, queues if queues is not None else [QueueInfo("default")])


def config(actions: str, *tiers: Sequence[str]) -> SchedulerConfig:
    """A configuration with the given actions and tiers of plugin names."""
    lines = [f'actions: "{actions}"', "tiers:"]
    for tier in tiers:
        lines.append("- plugins:")
        lines.extend(f"  - name: {p}" for p in tier)
    return parse_config("\n".join(lines) + "\n")


DEFAULT_TIERS: tuple[tuple[str, ...], ...] = (
    ("priority", "gang", "conformance"),
    ("overcommit", "drf", "predicates", "proportion", "nodeorder"),
)


def bound_nodes(result: SessionResult) -> dict[str, str]:
    """Task uid -> node of every bind a session decided."""
    return {b.task: b.node for b in result.binds}
