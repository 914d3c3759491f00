"""Settings: typed per command, each filled once from its own flags (cli/flags.py).

Three layers, each a dataclass over the one before: what every process reads
(`ProcessSettings`: the connection, the namespace, ports, logs, leader election, webhook
serving), what `koordqueue schedule` reads (`SchedulerSettings`), and what `koordqueue run`
reads (`ControllerSettings`: the controller's, and those of the scheduler it runs beside it).
A component types its settings as the narrowest layer it needs, so the scheduler cannot read
a controller flag (mypy says so) and `schedule --help` lists only what it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from koordqueue.domain.names import QUEUE_NAMESPACE

API_CONNECTIONS_BESIDES_WRITERS: Final = 48
"""Connections for the API callers other than the controller's writers: the owner thread's
resync lists, the scheduler's binders (16) and gate workers, kopf's handlers and watches."""


@dataclass(frozen=True, slots=True)
class ProcessSettings:
    """What every koordqueue process reads; defaults are the production defaults."""

    namespace: str = QUEUE_NAMESPACE
    """The Queues' namespace (the controller's), and the Lease's unless told otherwise."""
    kubeconfig: str | None = None
    context: str | None = None
    metrics_port: int = 8080
    health_port: int = 8081
    log_format: str = "json"
    log_level: str = "info"
    resync_period: float = 60.0
    """Seconds between full re-lists (the controller's resync, the scheduler's cache)."""
    webhook_port: int = 0
    """Port of every admission webhook of the process (0: off): the pod gates, ElasticQuota
    validation and workload defaulting (koordqueue/kube/webhooks/)."""
    webhook_cert: str | None = None
    webhook_key: str | None = None
    # --- leader election (active/standby on a coordination.k8s.io Lease) --------------------
    leader_elect: bool = False
    """Off for a single process (tests, a laptop); on in deploy/, where replicas can overlap."""
    leader_elect_lease_duration: float = 15.0
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0
    leader_elect_resource_name: str = ""
    """"" = koord-queue for `run`, koord-queue-scheduler for `schedule`."""
    leader_elect_resource_namespace: str = ""
    """"" = --namespace."""

    @property
    def api_connections(self) -> int:
        """Pooled API connections: one per thread that may call the API at once (binders,
        gate workers, kopf handlers, watches), so that none is discarded and re-opened with a
        fresh TLS handshake under load."""
        return API_CONNECTIONS_BESIDES_WRITERS


@dataclass(frozen=True, slots=True)
class SchedulerSettings(ProcessSettings):
    """What `koordqueue schedule` reads (SPEC 3): the process's, and the scheduler's own."""

    scheduler_name: str = "volcano"
    schedule_period: float = 1.0
    """Upper bound between sessions (reclaim, preempt and backfill run at least this often)."""
    schedule_batch_gap: float = 0.02
    """A session starts this long after pending work arrives, so a burst shares one session."""
    scheduler_conf: str | None = None
    feature_gates: str = ""
    gate_removal_worker_num: int = 5
    gate_reservation_timeout: float = 0.0
    """Seconds a gated pod's reservation (it passed the queue capacity check, its gate was
    removed) may wait to be placed before it is released with a ReservationExpired event;
    0: never (Volcano)."""


@dataclass(frozen=True, slots=True)
class ControllerSettings(SchedulerSettings):
    """What `koordqueue run` reads: the controller's own, and the scheduler's (run runs both)."""

    oversell_rate: str = "1"
    enable_parent_limit: bool = False
    """Accepted for Koord-Queue compatibility and ignored: the parent chain is always checked."""
    admission_period: float = 1.0
    manage_jobs: bool = True
    suspend_at_creation: bool = True
    """The workload webhook holds (suspends) a workload that names a quota at its creation
    (Kueue's rule); False: Koord-Queue's rule, only a workload created held is queued."""
    integrations: str = "batch/job"
    """`--integrations`: comma-separated job integration names the controller serves
    (koordqueue.domain.integrations); a kind whose CRD is missing is skipped at start-up."""
    job_workers: int = 64
    """Accepted for compatibility and unused: Job events are queued to the controller's one
    owner thread; the API writes they cause run on the `api_writers` pool."""
    api_writers: int = 64
    """API calls of the controller in flight at once (its bounded write pool). A new Job costs
    four writes in sequence (mark, create unit, admit, resume), ~0.1 s each on a busy API
    server: 64 keep ~160 new Jobs/s flowing (the 64 Job workers of before, each blocking on
    its Job's four writes, allowed the same)."""
    job_running_timeout: float = 0.0
    """Seconds a resumed Job may stay Pending (no pod Running) with its unit Dequeued before the
    unit backs off (TimeoutBackoff, quota released) and the Job is suspended again; 0: off."""
    job_backoff_time: float = 0.0
    """Seconds a unit backed off by the running timeout waits before it is Enqueued again
    (Koord-Queue's Job handle uses 0)."""
    reclaim_protect_time: float = 0.0
    """Koord-Queue's defaultReclaimProtectTime in seconds: a unit given quota less than this
    long ago (status.lastAllocateTime) is no queue-level preemption victim; 0: none."""
    default_preemptible: bool = True
    """A unit without the label quota.scheduling.alibabacloud.com/preemptible may be a
    queue-level preemption victim."""
    strict_dequeue_mode: bool = False
    """Koord-Queue's `--strictDequeueMode`: an admitted unit (a Reserved one once its admission
    checks are all Ready) goes to SchedReady, its workload suspended until the scheduler writes
    SchedSucceed, instead of Dequeued; `queue_list` limits it to those Queues."""
    queue_list: str = ""
    """Koord-Queue's `--queue-list`: comma-separated Queues strict dequeue mode applies to
    (empty: every queue)."""
    backoff_base_seconds: float = 10.0
    """The first wait of status.requeueState after a failed admission check (doubling, 15 min
    cap): Koord-Queue's 10 s; tests shorten it as Kueue's do (backoffBaseSeconds)."""
    enable_api_handler: bool = False
    """Koord-Queue's `--enableApiHandler`: serve the read-only debug API (kube/debug_api.py)
    on `api_handler_port` once this process leads."""
    api_handler_port: int = 19876
    visibility_port: int = 0
    """Port of the visibility API (kube/visibility/; 0: off), TLS with the cert and key below."""
    visibility_cert: str | None = None
    visibility_key: str | None = None

    @property
    def api_connections(self) -> int:
        """The process's connections and one per writer of the controller's pool."""
        return self.api_writers + API_CONNECTIONS_BESIDES_WRITERS


def controller_settings(settings: ProcessSettings) -> ControllerSettings:
    """`settings` as the controller's: a process that runs the controller reads run's flags."""
    if isinstance(settings, ControllerSettings):
        return settings
    raise TypeError(
        f"the controller reads koordqueue run's settings (ControllerSettings), "
        f"not {type(settings).__name__}"
    )
