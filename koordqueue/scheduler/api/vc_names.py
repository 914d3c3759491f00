"""Names of Volcano's queue, SLA and protection plugins (nodegroup, sla, cdp, ...): their
arguments, the labels and annotations they read, and the refusals they give.

Spelled as Volcano spells them (volcano.sh/apis scheduling/v1beta1 labels.go and
pkg/scheduler/plugins/<name>), so a user's volcano-scheduler.conf, queues and pods work
unchanged.
"""

from __future__ import annotations

from typing import Final

# --- nodegroup ---------------------------------------------------------------------------------
NODEGROUP: Final = "nodegroup"
NODE_GROUP_NAME_LABEL: Final = "volcano.sh/nodegroup-name"
"""Node label: the node group the node belongs to."""
NODE_GROUP_LIMITS_ANNOTATION: Final = "volcano.sh/nodegroup-resource-limits"
"""Queue annotation: JSON {group: {resource: quantity}} capping the queue's use per group."""
NODEGROUP_STRICT: Final = "strict"
NODEGROUP_PREFERRED_ORDER: Final = "enablePreferredOrder"
NODEGROUP_ROOT_QUEUE: Final = "root"
NODEGROUP_BASE_SCORE: Final = 100.0
# refusals: Volcano's reasons, named by the plugin (as deviceshare's are) for explain and events
ERR_NODE_GROUP_AFFINITY_NOT_FOUND: Final = "nodegroup: node group affinity not specified"
ERR_NODE_GROUP_LABEL_NOT_FOUND: Final = "nodegroup: node group label not found"
ERR_NODE_GROUP_UNSATISFIED: Final = "nodegroup: node does not satisfy the node group affinity"
ERR_NODE_GROUP_LIMIT_INVALID: Final = "nodegroup: node group resource limit annotation invalid"
ERR_NODE_GROUP_LIMIT_EXCEEDED: Final = "nodegroup: node group resource limit exceeded"
NODE_GROUP_LIMITS_WARNING: Final = "queue {queue} has an invalid {key} annotation: {error}"

# --- sla ---------------------------------------------------------------------------------------
SLA: Final = "sla"
SLA_WAITING_TIME: Final = "sla-waiting-time"
"""The plugin argument (and the PodGroup annotation Volcano also reads, unprefixed)."""
SLA_WAITING_TIME_ANNOTATION: Final = "volcano.sh/sla-waiting-time"
"""PodGroup annotation, read before the unprefixed one."""
SLA_NOT_DUE: Final = (
    "sla: waiting time not yet due: from {when} sla lets the PodGroup in past its queue's "
    "limits (when sla is in an earlier tier than the plugin holding it back)"
)
SLA_ARGUMENT_WARNING: Final = "sla: invalid global waiting time {value!r} in plugin arguments"

# --- cdp ---------------------------------------------------------------------------------------
CDP: Final = "cdp"
COOLDOWN_TIME: Final = "volcano.sh/cooldown-time"
"""Pod label or annotation: how long after being scheduled a running pod may not be evicted."""

# --- task-topology -----------------------------------------------------------------------------
TASK_TOPOLOGY: Final = "task-topology"
TASK_TOPOLOGY_WEIGHT: Final = "task-topology.weight"
TASK_TOPOLOGY_AFFINITY: Final = "volcano.sh/task-topology-affinity"
TASK_TOPOLOGY_ANTI_AFFINITY: Final = "volcano.sh/task-topology-anti-affinity"
TASK_TOPOLOGY_TASK_ORDER: Final = "volcano.sh/task-topology-task-order"
TASK_SPEC: Final = "volcano.sh/task-spec"
"""Pod annotation (else label) naming the pod's task in its job (`TaskInfo.role`)."""
TASK_TOPOLOGY_UNKNOWN_TASK: Final = "task {task} do not exist in job <{namespace}/{job}>"
TASK_TOPOLOGY_DUPLICATE_TASK: Final = "task {task} is duplicate in job <{namespace}/{job}>"

# --- resourcequota -----------------------------------------------------------------------------
RESOURCEQUOTA: Final = "resourcequota"
RESOURCE_QUOTA_INSUFFICIENT: Final = (
    "resourcequota: resource quota insufficient, requested: {requested}, used: {used}, "
    "limited: {hard} (ResourceQuota {namespace}/{name})"
)

# --- tdm ---------------------------------------------------------------------------------------
TDM: Final = "tdm"
TDM_ZONE_PREFIX: Final = "tdm.revocable-zone."
"""Argument prefix: `tdm.revocable-zone.<zone>: "HH:MM-HH:MM"` (local time)."""
TDM_EVICT_PERIOD: Final = "tdm.evict.period"
TDM_DEFAULT_EVICT_PERIOD: Final = 60.0
REVOCABLE_ZONE: Final = "volcano.sh/revocable-zone"
"""Node label: the node's revocable zone; pod annotation "*": the pod may use any."""
PREEMPTABLE: Final = "volcano.sh/preemptable"
JDB_MIN_AVAILABLE: Final = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE: Final = "volcano.sh/jdb-max-unavailable"
ERR_TDM_ZONE_FORMAT: Final = "tdm: revocable zone {raw} format error"
ERR_TDM_ZONE_UNKNOWN: Final = "tdm: revocable zone {zone} not support"
ERR_TDM_WINDOW_CLOSED: Final = "tdm: current time beyond revocable zone {zone}:{raw}"
ERR_TDM_NOT_REVOCABLE: Final = "tdm: not allow to dispatch to revocable node"

TASK_ANNOTATIONS: Final = frozenset({COOLDOWN_TIME})
"""Pod labels / annotations the adapter keeps on a task for these plugins (`TaskInfo.vc`)."""
JOB_ANNOTATIONS: Final = frozenset({
    SLA_WAITING_TIME_ANNOTATION, SLA_WAITING_TIME, TASK_TOPOLOGY_AFFINITY,
    TASK_TOPOLOGY_ANTI_AFFINITY, TASK_TOPOLOGY_TASK_ORDER, JDB_MIN_AVAILABLE,
    JDB_MAX_UNAVAILABLE, PREEMPTABLE,
})
"""PodGroup annotations the adapter keeps on a job (`JobInfo.annotations`)."""
