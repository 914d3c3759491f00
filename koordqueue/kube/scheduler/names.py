"""Annotations, condition types, reasons and defaults of the scheduler adapter, spelled once."""

from __future__ import annotations

from typing import Final

from koordqueue.domain.names import (
    EVENT_NORMAL,
    EVENT_WARNING,
    REASON_FAILED_SCHEDULING,
    REASON_SCHEDULED,
    REASON_UNSCHEDULABLE,
)
from koordqueue.scheduler.api.names import DEFAULT_QUEUE

__all__ = [
    "DEFAULT_QUEUE",
    "EVENT_NORMAL",
    "EVENT_WARNING",
    "REASON_FAILED_SCHEDULING",
    "REASON_SCHEDULED",
    "REASON_UNSCHEDULABLE",
]
# (event reasons and the default queue are spelled once: in domain.names and
# scheduler.api.names; re-exported here for the adapter)

DEFAULT_SCHEDULER_NAME: Final = "volcano"
GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
"""Pods join a PodGroup (in their namespace) through this annotation, as in Volcano."""
QUEUE_NAME_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
"""Queue of a pod that belongs to no PodGroup (default: the default queue)."""
DEFAULT_QUEUE_WEIGHT: Final = 1

POD_SCHEDULED: Final = "PodScheduled"
REASON_EVICT: Final = "Evict"
EVICT_MESSAGE: Final = "Evicted by the scheduler ({reason})"
SCHEDULED_MESSAGE: Final = "Successfully assigned {namespace}/{name} to {node}"
"""kube-scheduler's and Volcano's wording, which `kubectl describe pod` readers know."""
BIND_FAILED_MESSAGE: Final = "binding to node {node} rejected: {error}; the pod is placed again"
ANNOTATE_FAILED_MESSAGE: Final = (
    "device annotations for node {node} not written; the pod is placed again"
)
STANDALONE_JOB_PREFIX: Final = "pod/"
"""Job uid of a pod without PodGroup: the pod is its own job of minAvailable 1."""

CONDITION_SCHEDULED: Final = "Scheduled"
CONDITION_UNSCHEDULABLE: Final = "Unschedulable"
"""PodGroup condition types, as Volcano's gang plugin writes them at session close."""
REASON_GANG_READY: Final = "tasks in gang are ready to be scheduled"
"""Volcano's reason on the Scheduled condition (a sentence, not CamelCase: kept as theirs)."""
REASON_NOT_ENOUGH_RESOURCES: Final = "NotEnoughResources"
