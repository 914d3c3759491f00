"""Plain scheduler data: resources, tasks, jobs, nodes, queues and fit errors."""

from koordqueue.scheduler.api.fit_errors import FitErrors
from koordqueue.scheduler.api.job_info import JobInfo, PodGroupPhase
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.queue_info import QueueInfo
from koordqueue.scheduler.api.resource import (
    EPSILON_NANOS,
    fits,
    insufficient,
    less_equal,
    less_equal_in_dims,
)
from koordqueue.scheduler.api.task_info import (
    ALLOCATED_STATUSES,
    READY_STATUSES,
    HostPort,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    TaskInfo,
    TaskStatus,
    Toleration,
)

__all__ = [
    "ALLOCATED_STATUSES",
    "EPSILON_NANOS",
    "READY_STATUSES",
    "FitErrors",
    "HostPort",
    "JobInfo",
    "NodeAffinity",
    "NodeInfo",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PodGroupPhase",
    "QueueInfo",
    "Taint",
    "TaskInfo",
    "TaskStatus",
    "Toleration",
    "fits",
    "insufficient",
    "less_equal",
    "less_equal_in_dims",
]
