"""Every label, annotation, event reason, message format and default of SPEC 2, in one place.

Why one module: the controller, the simulator, the docs and the tests must all agree on the
exact spelling; a typo in a label silently breaks the mapping, so nothing spells them twice.
"""

from __future__ import annotations

from typing import Final

# --- API groups and kinds (SPEC 1) -------------------------------------------------------
ELASTIC_QUOTA_GROUP: Final = "scheduling.sigs.k8s.io"
ELASTIC_QUOTA_VERSION: Final = "v1alpha1"
ELASTIC_QUOTA_PLURAL: Final = "elasticquotas"
KOORD_QUEUE_GROUP: Final = "scheduling.x-k8s.io"
KOORD_QUEUE_VERSION: Final = "v1alpha1"
QUEUE_PLURAL: Final = "queues"
QUEUE_UNIT_PLURAL: Final = "queueunits"
VOLCANO_GROUP: Final = "scheduling.volcano.sh"
VOLCANO_VERSION: Final = "v1beta1"
POD_GROUP_PLURAL: Final = "podgroups"
VOLCANO_QUEUE_PLURAL: Final = "queues"
TOPOLOGY_GROUP: Final = "topology.volcano.sh"
TOPOLOGY_VERSION: Final = "v1alpha1"
HYPER_NODE_PLURAL: Final = "hypernodes"
NODEINFO_GROUP: Final = "nodeinfo.volcano.sh"
NODEINFO_VERSION: Final = "v1alpha1"
NUMATOPOLOGY_PLURAL: Final = "numatopologies"

# --- Labels and annotations (SPEC 2) -----------------------------------------------------
QUOTA_NAME_LABEL: Final = "quota.scheduling.koordinator.sh/name"
QUOTA_PARENT_LABEL: Final = "quota.scheduling.koordinator.sh/parent"
QUOTA_IS_PARENT_LABEL: Final = "quota.scheduling.koordinator.sh/is-parent"
QUEUE_POLICY_KEY: Final = "koord-queue/queue-policy"
SYNCED_ANNOTATION_PREFIX: Final = "koord-queue/"
MAX_DEPTH_ANNOTATION: Final = "koord-queue/max-depth"
WAIT_FOR_PODS_RUNNING_ANNOTATION: Final = "koord-queue/wait-for-pods-running"
ENABLE_PREEMPTION_ANNOTATION: Final = "koord-queue/enable-queueunit-preemption"
PRIORITY_THRESHOLD_ANNOTATION: Final = "koord-queue/priority-threshold"
PREEMPTIBLE_ANNOTATION: Final = "koord-queue/preemptible"
PREEMPTIBLE_LABEL: Final = "quota.scheduling.alibabacloud.com/preemptible"
"""A unit's label: "false" keeps it from being a queue-level preemption victim ("true" makes
it one even with --default-preemptible=false)."""
# A unit's actual oversold type (Koord-Queue utils/const.go): "ForceQuotaOverSold" counts its usage
# as oversold, anything else (Forbidden, absent) as guaranteed. Accounting only, not CheckUsage.
ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: Final = (
    "quota.scheduling.koordinator.sh/actual-quota-oversold-type"
)
QUOTA_OVERSOLD_TYPE_ANNOTATION: Final = "quota.scheduling.koordinator.sh/quota-oversold-type"
"""The oversold type a unit asks for (Koord-Queue reports it; the actual one decides)."""
QUOTA_OVERSOLD_TYPE_FORCE: Final = "ForceQuotaOverSold"
QUOTA_OVERSOLD_TYPE_FORBIDDEN: Final = "ForbiddenQuotaOverSold"
# Usage Koord-Queue's queue controller writes on each quota's Queue (JSON maps of whole units).
QUEUE_USED_ANNOTATION: Final = "alibabacloud.com/queue-used"
QUEUE_GUARANTEED_USED_ANNOTATION: Final = "alibabacloud.com/queue-guaranteed-used"
QUEUE_SELF_USED_ANNOTATION: Final = "alibabacloud.com/queue-self-used"
QUEUE_SELF_GUARANTEED_USED_ANNOTATION: Final = "alibabacloud.com/queue-self-guaranteed-used"
QUEUE_CHILDREN_USED_ANNOTATION: Final = "alibabacloud.com/queue-children-used"
QUEUE_CHILDREN_GUARANTEED_USED_ANNOTATION: Final = "alibabacloud.com/queue-children-guaranteed-used"
BLOCK_TIMEOUT_ANNOTATION: Final = "koord-queue/block-timeout-seconds"
"""Opt-in (not in Koord-Queue): a Block head may hold its quota this long, then the others pass."""
STOP_POLICY_ANNOTATION: Final = "koord-queue/stop-policy"
"""On a Queue (or synced from its quota): `Hold` admits nothing new from it; what was admitted
keeps running (Kueue's LocalQueue stopPolicy Hold; `kubectl koordqueue stop queue`)."""
STOP_POLICY_HOLD: Final = "Hold"
QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION: Final = "koord-queue/queue-items-refresh-interval"
"""On a Queue: how often its status.queueItemDetails is refreshed (a Go duration, e.g. `30s`)."""
DISABLE_SHOW_QUEUE_ITEMS_ANNOTATION: Final = "koord-queue/disable-show-queue-items"
"""On a Queue: present (any value) stops the status.queueItemDetails refresh; the last stays."""
QUEUE_ITEMS_KIND_ACTIVE: Final = "active"
"""The one key of status.queueItemDetails Koord-Queue's policies write (every policy)."""

# --- Defaults ------------------------------------------------------------------------------
ROOT_QUOTA: Final = "koordinator-root-quota"
QUEUE_NAMESPACE: Final = "koord-queue"
QUEUE_PRIORITY: Final = 1000
DEFAULT_POLICY: Final = "Priority"
DEFAULT_MAX_DEPTH: Final = -1
DEFAULT_PRIORITY_THRESHOLD: Final = 4
DEFAULT_OVERSELL_RATE: Final = 1
DEFAULT_QUEUE_ITEMS_REFRESH_SECONDS: Final = 15.0
"""Koord-Queue refreshes each Queue's status.queueItemDetails every 15 s by default."""

# Policies a quota may ask for (SPEC 2.2) and those the queue factory can serve (SPEC 2.3).
KNOWN_POLICIES: Final = ("Priority", "Block", "Round", "Intelligent")
REGISTERED_POLICIES: Final = ("Priority", "Block", "Intelligent")

# --- Event types and reasons -------------------------------------------------------------
EVENT_NORMAL: Final = "Normal"
EVENT_WARNING: Final = "Warning"
REASON_QUEUE_NOT_FOUND: Final = "QueueNotFound"
REASON_ADD_QUEUE_FAIL: Final = "AddQueueFail"
REASON_FAILED_SCHEDULING: Final = "FailedScheduling"
REASON_ADMITTED: Final = "Admitted"
REASON_QUOTA_RESERVED: Final = "QuotaReserved"
"""On a unit that reserved quota on a queue with admission checks and waits for them."""
REASON_INVALID_ADMISSION_CHECKS: Final = "InvalidAdmissionChecks"
"""On a Queue whose spec.admissionChecks cannot be read (it then asks for none)."""
REASON_DUPLICATE_QUOTA: Final = "DuplicateQuotaName"
REASON_INVALID_QUOTA: Final = "InvalidQuota"
REASON_QUOTA_CYCLE: Final = "QuotaCycle"
"""On an ElasticQuota whose chain of parents loops (or whose edit would have closed a loop)."""
REASON_PARENT_NOT_FOUND: Final = "ParentNotFound"
REASON_QUOTA_ACTIVE: Final = "Active"
REASON_QUOTA_VALID: Final = "Valid"
CONDITION_VALID: Final = "Valid"
"""ElasticQuota status condition: the last applied spec was accepted (quota_health.py)."""
CONDITION_ACTIVE: Final = "Active"
"""ElasticQuota status condition: the quota admits units (quota_health.py)."""
REASON_INVALID_JOB: Final = "InvalidJob"
REASON_PREEMPTED: Final = "Preempted"
REASON_RECLAIMED: Final = "Reclaimed"
"""Normal event on a preemption victim once its pods not running were taken back."""
REASON_PREEMPTION_REFUSED: Final = "PreemptionRefused"
"""Warning event on a unit whose Intelligent queue was asked to preempt."""
REASON_BACKOFF: Final = "Backoff"
"""On a unit that failed downstream (SchedFailed) and waits out its back-off."""
REASON_INVALID_QUEUE_UNIT: Final = "InvalidQueueUnit"
REASON_SCHEDULED: Final = "Scheduled"
"""Simulator only: the scheduler bound some of an admitted unit's pods this step."""
REASON_UNSCHEDULABLE: Final = "Unschedulable"
"""Simulator only: the scheduler could not place an admitted unit's pods this step."""
REASON_RESUME: Final = "Resume"
"""On the Job when its unit reached SchedSucceed and it was resumed (Koord-Queue job extension)."""

# --- Message formats (SPEC 2.1, 2.3, 2.5); rendered only through these ----------------------
MSG_QUEUE_NOT_FOUND: Final = "queue {queue} not found for queueUnit {namespace}/{name}"
MSG_QUEUE_HELD: Final = f"queue {{queue}} is held ({STOP_POLICY_ANNOTATION}={STOP_POLICY_HOLD})"
# One line per skip a round records (domain/verdict.py; explain says more, with the numbers).
MSG_BLOCKED_BY_HEAD: Final = "quota {quota} is blocked by its head {head}"
MSG_HIGH_PRIORITY_WAITING: Final = (
    "{count} unit(s) at or above priority threshold {threshold} wait first: {first}"
)
MSG_BEYOND_MAX_DEPTH: Final = "position {position} is beyond koord-queue/max-depth {depth}"
MSG_WAITING_FOR_PODS_RUNNING: Final = "waits for admitted units to run: {units}"
MSG_BACKING_OFF: Final = "backing off after a failure until t={until:.0f}"
MSG_NOT_OFFERED: Final = "not offered by its policy this round"
MSG_ADMITTED: Final = "admitted into quota {quota} (checked {path})"
MSG_PREEMPTED: Final = "preempted by {unit}; back in queue"
MSG_WAITING_RECLAIM: Final = "Waiting job extension to reclaim resources."
"""A preemption victim's status message until its pods are reclaimed (Koord-Queue's words)."""
MSG_RECLAIMED: Final = "reclaimed: {replicas} admitted replica(s) not running were taken back"
MSG_PREEMPTION_REFUSED: Final = (
    "queue {queue}: preemption refused, the Intelligent policy does not implement preemption"
)
"""Preempted event on a victim (and its status message unless a Job backs it)."""
MSG_SCHED_FAILED_BACKOFF: Final = "scheduling failed; retry {attempts} in {delay:.0f}s"
MSG_DUPLICATE_QUOTA: Final = (
    "quota name {name} is also defined in namespace {in_force}, whose older copy "
    "{in_force}/{name} is in force; names are cluster-wide, so this copy ({ignored}/{name}) "
    "is ignored"
)
MSG_QUOTA_ACTIVE: Final = "admits units through queue {namespace}/{name}"
MSG_QUOTA_VALID: Final = "spec accepted"
QUOTA_LAST_VALID_FIELD: Final = "lastValid"
"""ElasticQuota status field: the labels and spec in force while the object is refused
(domain/quota_fold.py), so a restarted controller and explain fold the same definition."""
MSG_QUOTA_REFUSED_KEPT: Final = "the last valid definition stays in force"
MSG_QUOTA_REFUSED_NONE: Final = "no definition of it is in force"
MSG_QUOTA_CYCLE_REFUSED: Final = (
    "parent {parent} would close a cycle ({cycle}); the edit is not applied"
)
MSG_LIMITED: Final = "limited quotaName:{quota}, limited resKey:{resource},"
MSG_CYCLE: Final = (
    "CheckUsage found cycle reference, item:{unit}, quotaName:{quota}, visited quota: {visited}"
)
MSG_QUOTA_MISSING: Final = (
    "CheckUsage found quota not exist, item:{unit}, quotaName:{quota}, visited quota: {visited}"
)
MSG_EMPTY_QUOTA_SPEC: Final = (
    "limited quotaName:{quota}, quota spec is empty but queue unit res is not empty"
)
MSG_ALREADY_RESERVED: Final = (
    "reserve item failed, itemName:{unit}, quotaName:{quota}, already reserved in another quota "
    "{reserved}"
)
MSG_RESERVE_QUOTA_MISSING: Final = (
    "reserve item failed, quota not found, itemName:{unit}, quotaName:{quota}"
)
MSG_NO_QUOTA_LABEL: Final = f"no quota label: set label {QUOTA_NAME_LABEL} to admit this unit"
MSG_UNKNOWN_POLICY: Final = (
    "queue {queue} asks for queue policy {policy!r}, which is not registered "
    "(registered: Priority, Block, Intelligent)"
)

# --- batch/v1 Job extension (Koord-Queue pkg/jobext: handles/job.go, default_job_reconciler.go) -
SCHEDULER_NAME_ANNOTATION: Final = "koord-queue/scheduler-name"
"""On a leader-election Lease: the scheduler name its holder runs (`schedule`, or `run`'s
embedded scheduler), checked by a second scheduler of that name at start-up."""
LAST_APPLIED_ANNOTATION: Final = "kubectl.kubernetes.io/last-applied-configuration"
"""kubectl apply's copy of the whole manifest: the workload's, never copied to its unit."""
JOB_HAS_ENQUEUED_ANNOTATION: Final = "koord-queue/job-has-enqueued"
"""On a Job: "true" once it was enqueued; also makes it managed after it started."""
JOB_ENQUEUE_TIMESTAMP_ANNOTATION: Final = "koord-queue/job-enqueue-timestamp"
JOB_DEQUEUE_TIMESTAMP_ANNOTATION: Final = "koord-queue/job-dequeue-timestamp"
"""Set when the Job is resumed, emptied when it is suspended again."""
MSG_RESUME: Final = "Job is resumed by job-extension"
MSG_UNIT_ENQUEUED: Final = "Enqueued"
MSG_UNIT_RUNNING: Final = "Running"
MSG_UNIT_SUCCEEDED: Final = "Succeeded"
MSG_UNIT_FAILED: Final = "Failed"
MSG_ENQUEUED_AFTER_PREEMPTED: Final = "Enqueued after preempted"
MSG_ENQUEUED_AFTER_BACKOFF: Final = "Enqueued because backoff timeout"
MSG_RUNNING_TIMEOUT: Final = "Backoff due to running timeout"

# --- QueueUnit lifecycle (issue 35; Koord-Queue pkg/jobext/framework/activation.go) ----------
ACTIVE_ANNOTATION: Final = "scheduling.x-k8s.io/active"
"""On a workload: sets its unit's spec.active when present and a boolean (strconv.ParseBool's
spellings); absent changes nothing, so a deactivation by the budget is not undone."""
MAX_EXEC_TIME_ANNOTATION: Final = "scheduling.x-k8s.io/max-exec-time-seconds"
"""On a workload: its unit's spec.maximumExecutionTimeSeconds (a positive int32)."""
KUEUE_MAX_EXEC_TIME_LABEL: Final = "kueue.x-k8s.io/max-exec-time-seconds"
"""Kueue's label for the same budget, read when the annotation is absent (beyond Koord-Queue)."""
REASON_DEACTIVATED: Final = "Deactivated"
"""Normal event on the workload (on the unit when it has none) when deactivation evicts it."""
MSG_DEACTIVATED: Final = "Evicted because the queue unit is deactivated"
MSG_DEACTIVATED_EVENT: Final = (
    "{kind} is suspended and its resources are reclaimed because the queue unit is deactivated"
)
MSG_INACTIVE: Final = "inactive (spec.active is false): never admitted until it is activated"
REASON_MAX_EXEC_TIME_EXCEEDED: Final = "MaximumExecutionTimeExceeded"
"""Warning event on the workload (on the unit when it has none) when its budget is spent."""
MSG_MAX_EXEC_TIME_EXCEEDED: Final = "Evicted because the maximum execution time was exceeded"
MSG_MAX_EXEC_TIME_EVENT: Final = "The maximum execution time ({budget}s) was exceeded"
MSG_BEING_RECLAIMED: Final = "deactivated, waits for its preemption's reclaim to finish"

# --- Job integrations beyond batch/v1 Job (issue 13; koordqueue/domain/integrations) ---------
INTEGRATION_SUSPEND_ANNOTATION: Final = "scheduling.x-k8s.io/suspend"
"""Kubeflow jobs: "true" while the queue holds the job (Koord-Queue handles.QueueAnnotation)."""
QUEUING_CONDITION: Final = "Queuing"
"""Kubeflow jobs: the status condition Koord-Queue sets True when enqueued, False when dequeued."""
MSG_JOB_ENQUEUED_CONDITION: Final = "Job Enqueued"
MSG_JOB_DEQUEUED_CONDITION: Final = "Job Dequeued"
RAY_ORIGINATED_FROM_LABEL: Final = "ray.io/originated-from-crd"
"""RayCluster: KubeRay's label naming the kind it was made for; Koord-Queue leaves a RayCluster
labelled "RayCluster" alone."""
ARGO_MIN_RESOURCES_ANNOTATION: Final = "koord-queue/min-resources"
"""Argo Workflow: the resource list (YAML or JSON) its unit asks for (Koord-Queue's only source
of a Workflow's demand)."""
ARGO_SUSPEND_TEMPLATE: Final = "koord-queue-suspend"
"""Argo Workflow: a suspend template of this name marks a Workflow as the queue's."""
ARGO_ENQUEUED_CONDITION: Final = "Enqueued"
"""Argo Workflow: the status condition Koord-Queue sets True when enqueued."""
MSG_ARGO_ENQUEUED: Final = "{name} is enqueued"
POD_ADMISSION_GATE: Final = "koord-queue/admission"
"""Plain pods: the scheduling gate that holds a queued pod; removed to admit it (Kueue's
kueue.x-k8s.io/admission)."""
POD_GROUP_NAME_LABEL: Final = "koord-queue/pod-group-name"
"""Plain pods: pods with the same value in one namespace form one unit (Kueue's
kueue.x-k8s.io/pod-group-name)."""
POD_GROUP_TOTAL_COUNT_ANNOTATION: Final = "koord-queue/pod-group-total-count"
"""Plain pods: how many pods the group has; its unit is made when that many exist."""
POD_RETRIABLE_IN_GROUP_ANNOTATION: Final = "koord-queue/retriable-in-group"
"""Plain pods: "false" on any member ends the group as Failed once no member is active."""
POD_GROUP_SERVING_ANNOTATION: Final = "koord-queue/pod-group-serving"
"""A pod group that serves (a StatefulSet's pods; Kueue's kueue.x-k8s.io/pod-group-serving):
its unit is made with its first pod and holds the total count; a gated pod that comes while
it is admitted (a restarted or rolled replica) is let go."""
STATEFULSET_GROUP_PREFIX: Final = "statefulset-"
"""A StatefulSet's pods form the pod group statefulset-<name> (Kueue's workload name prefix)."""
LWS_GROUP_PREFIX: Final = "leaderworkerset-"
"""Each group of a LeaderWorkerSet's pods is the pod group leaderworkerset-<name>-<index>
(Kueue's workload name, without its hash of the LeaderWorkerSet's uid)."""
POD_GROUP_ROLE_ANNOTATION: Final = "koord-queue/pod-group-role"
"""A LeaderWorkerSet's pods: the pod set a pod is counted in (leader, worker, or main when
there is no leader template; Kueue's kueue.x-k8s.io/role-hash as its LWS pod reconciler sets
it). Its group waits for all of its pods, as a plain group does."""
REASON_RUNS_OUTSIDE_QUOTA: Final = "RunsOutsideQuota"
"""On a workload that names a quota but was created running (issue 33): it is not queued."""
REASON_UNIT_CREATE_REFUSED: Final = "QueueUnitCreateRefused"
"""On a workload of an integration kind whose QueueUnit (or the enqueue marks before it) the
API refused: the controller tries again after a back-off."""
MSG_UNIT_CREATE_REFUSED: Final = (
    "creating QueueUnit {unit} was refused ({error}); attempt {attempt}, next in {delay:.0f}s"
)

# --- Visibility API (issue 27: served by the controller, registered with an APIService) -----
VISIBILITY_GROUP: Final = "visibility.koord-queue.io"
VISIBILITY_VERSION: Final = "v1alpha1"
VISIBILITY_QUEUES: Final = "queues"
VISIBILITY_QUOTAS: Final = "elasticquotas"
VISIBILITY_PENDING: Final = "pendingunits"
VISIBILITY_SUBRESOURCE: Final = "queueunits"
"""queues/NAME/queueunits, elasticquotas/NAME/queueunits: Koord-Queue's subresource name."""
VISIBILITY_SUMMARY_KIND: Final = "PendingUnitsSummary"
VISIBILITY_DEFAULT_LIMIT: Final = 1000
"""Items per answer unless `limit` says otherwise (Koord-Queue's and Kueue's default)."""
VISIBILITY_SERVICE: Final = "koordqueue-visibility"
"""The Service the APIService names (deploy/visibility.yaml); its certificate's SAN."""
VISIBILITY_SERVING_LABEL: Final = "koord-queue/visibility"
"""On the controller pod that has an admission round to show (the leader): the visibility
Service selects it, so the aggregator never reaches a standby."""
VISIBILITY_SERVING: Final = "serving"
POD_NAME_ENV: Final = "POD_NAME"
POD_NAMESPACE_ENV: Final = "POD_NAMESPACE"
"""The pod's own name and namespace (the Deployment's downward API), for the serving label."""
