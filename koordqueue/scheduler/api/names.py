"""Every reason, message format and default of the scheduler core, in one place.

Why: the Kubernetes adapter renders pod conditions and events from these strings and the
tests assert on them; spelling each one once keeps the three in agreement.
"""

from __future__ import annotations

from typing import Final

# --- Fit-error reasons (one per failing node, aggregated into a histogram) ----------------
INSUFFICIENT_RESOURCE: Final = "Insufficient {resource}"
NODE_SELECTOR_MISMATCH: Final = "node(s) didn't match node selector"
NODE_AFFINITY_MISMATCH: Final = "node(s) didn't match Pod's node affinity"
UNTOLERATED_TAINT: Final = "node(s) had untolerated taint {{{key}: {value}}}"
TOO_MANY_PODS: Final = "Too many pods"
HOST_PORTS_CONFLICT: Final = "node(s) didn't have free ports for the requested pod ports"
NODE_UNSCHEDULABLE: Final = "node(s) were unschedulable"
# kube-scheduler's FitError rendering (pkg/scheduler/framework: NoNodeAvailableMsg and the
# DefaultPreemption answers), so a pod's condition reads as under the default scheduler
NODES_AVAILABLE: Final = "0/{total} nodes are available:"
NO_NODES_AVAILABLE: Final = "no nodes available to schedule pods"
PREEMPTION_PREFIX: Final = "preemption: "
PREEMPTION_NEVER: Final = "not eligible due to preemptionPolicy=Never."
NO_VICTIMS: Final = "No preemption victims found for incoming pod"
NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"

# --- Job conditions -------------------------------------------------------------------------
GANG_UNSCHEDULABLE: Final = "{missing}/{total} tasks in gang unschedulable: {detail}"
POD_GROUP_NOT_READY: Final = "pod group is not ready, {histogram}"
NOT_ENOUGH_VALID_TASKS: Final = (
    "Not enough valid tasks for gang-scheduling, valid: {valid}, min: {min}"
)
NOT_ENOUGH_PODS_REASON: Final = "NotEnoughTasks"
QUEUE_REFUSED_MESSAGE: Final = "queue {queue} cannot take the request (capability reached)"
QUEUE_OVERUSED_MESSAGE: Final = "queue {queue} is over its deserved share"
QUEUE_NOT_FOUND_WARNING: Final = "job {job} dropped: queue {queue} does not exist"

# --- Eviction reasons ------------------------------------------------------------------------
EVICT_PREEMPT: Final = "preempt"
EVICT_RECLAIM: Final = "reclaim"
EVICT_SHUFFLE: Final = "shuffle"

# --- Well-known names -------------------------------------------------------------------------
UNSCHEDULABLE_TAINT_KEY: Final = "node.kubernetes.io/unschedulable"
"""Tolerating this taint lets a pod onto a cordoned node (as in Kubernetes)."""
CRITICAL_PRIORITY_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE: Final = "kube-system"
ROOT_QUEUE: Final = "root"
PREEMPT_NEVER: Final = "Never"
"""Pod `spec.preemptionPolicy` value that forbids the pod to evict others."""
HIERARCHY_ANNOTATION: Final = "volcano.sh/hierarchy"
"""Queue annotation: the queue's path in drf's hierarchical tree ("root/eng/dev")."""
HIERARCHY_WEIGHTS_ANNOTATION: Final = "volcano.sh/hierarchy-weights"
"""Queue annotation: one weight per path element of `volcano.sh/hierarchy` ("100/50/50")."""
NAMESPACE_WEIGHT_LABEL: Final = "volcano.sh/namespace.weight"
"""Namespace label: the namespace's weight for drf's namespace order (default 1)."""
DRF_BAD_HIERARCHY_WARNING: Final = "drf: queue {queue}: {detail}; {action}"
DRF_BAD_NAMESPACE_WEIGHT_WARNING: Final = (
    "drf: namespace {namespace}: label volcano.sh/namespace.weight={value!r} is not a positive"
    " integer; weight 1 is used"
)
QUEUE_STATE_OPEN: Final = "Open"
QUEUE_STATE_CLOSED: Final = "Closed"
QUEUE_STATE_CLOSING: Final = "Closing"
QUEUE_STATE_UNKNOWN: Final = "Unknown"
DEFAULT_QUEUE: Final = "default"
PLUGIN_ENTRY_POINT_GROUP: Final = "koordqueue.plugins"
DEFAULT_ACTIONS: Final = "enqueue, allocate, backfill"
OVERCOMMIT_FACTOR_DEFAULT: Final = 1.2
