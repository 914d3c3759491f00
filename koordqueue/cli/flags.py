"""Flags of `koordqueue run` and `schedule`: one table, from which argparse and the docs are built.

A command takes exactly the flags of the fields of its settings type (kube/settings.py:
`ControllerSettings` for run, `SchedulerSettings` for schedule), so its `--help` lists only
what it reads, and its settings are parsed once, into that type.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from koordqueue.domain.features import KNOWN, FeatureGateError, parse_feature_gates
from koordqueue.domain.integrations import integration_names
from koordqueue.kube.settings import ControllerSettings, SchedulerSettings

_DEFAULTS = ControllerSettings()
S = TypeVar("S", bound=SchedulerSettings)
COMMANDS: dict[str, type[SchedulerSettings]] = {
    "run": ControllerSettings,
    "schedule": SchedulerSettings,
}
"""Each command that takes flags, and the settings it reads."""


@dataclass(frozen=True, slots=True)
class Flag:
    name: str
    dest: str
    help: str
    default: Any
    type: Any = str
    choices: tuple[str, ...] | None = None

    @property
    def env(self) -> str:
        return "KOORDQUEUE_" + self.dest.upper()


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _positive(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value!r}")
    return number


def _non_negative(value: str) -> float:
    number = float(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value!r}")
    return number


def _integrations(value: str) -> str:
    """A comma list of known integration names (an unknown one is a CLI error)."""
    try:
        chosen = integration_names(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return ",".join(chosen)


def _feature_gates(value: str) -> str:
    """Known gates, boolean values, dependencies satisfied: else a CLI error at start-up."""
    try:
        parse_feature_gates(value)
    except FeatureGateError as exc:
        raise argparse.ArgumentTypeError(f"{exc.entry!r}: {exc.reason}") from None
    return value


def _positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value!r}")
    return number


FLAGS: tuple[Flag, ...] = (
    Flag(
        "--kubeconfig",
        "kubeconfig",
        "kubeconfig file (default: in-cluster, then $KUBECONFIG, ~/.kube/config)",
        None,
    ),
    Flag("--context", "context", "kubeconfig context to use", None),
    Flag(
        "--namespace",
        "namespace",
        "namespace that holds the Queues (and the Lease, unless "
        "--leader-elect-resource-namespace names another)",
        _DEFAULTS.namespace,
    ),
    Flag(
        "--oversellrate",
        "oversell_rate",
        "every quota max is multiplied by this in CheckUsage",
        _DEFAULTS.oversell_rate,
    ),
    Flag(
        "--enableParentLimit",
        "enable_parent_limit",
        "accepted for Koord-Queue compatibility; no effect (the parent chain is always checked)",
        _DEFAULTS.enable_parent_limit,
        _bool,
    ),
    Flag(
        "--admission-period",
        "admission_period",
        "seconds between admission rounds",
        _DEFAULTS.admission_period,
        _positive,
    ),
    Flag(
        "--job-workers",
        "job_workers",
        "accepted for compatibility; no effect (Job events go to the controller's one owner "
        "thread; the writes they cause run on the --api-writers pool)",
        _DEFAULTS.job_workers,
        _positive_int,
    ),
    Flag(
        "--api-writers",
        "api_writers",
        "API calls the controller makes at once (its bounded write pool; a new Job costs four "
        "writes in sequence); more absorbs longer bursts of Jobs on a slow API server",
        _DEFAULTS.api_writers,
        _positive_int,
    ),
    Flag(
        "--job-running-timeout",
        "job_running_timeout",
        "seconds a resumed Job may stay Pending (no pod Running) with its unit Dequeued; then "
        "the unit backs off (phase TimeoutBackoff, quota released) and the Job is suspended "
        "again (0: off, the reference's default)",
        _DEFAULTS.job_running_timeout,
        _non_negative,
    ),
    Flag(
        "--job-backoff-time",
        "job_backoff_time",
        "seconds a unit backed off by --job-running-timeout waits before it is Enqueued again",
        _DEFAULTS.job_backoff_time,
        _non_negative,
    ),
    Flag(
        "--reclaim-protect-time",
        "reclaim_protect_time",
        "seconds after a unit was given quota (status.lastAllocateTime) during which no "
        "queue-level preemption reclaims it (Koord-Queue's defaultReclaimProtectTime; 0: none)",
        _DEFAULTS.reclaim_protect_time,
        _non_negative,
    ),
    Flag(
        "--default-preemptible",
        "default_preemptible",
        "whether a unit without the label quota.scheduling.alibabacloud.com/preemptible may "
        "be a queue-level preemption victim",
        _DEFAULTS.default_preemptible,
        _bool,
    ),
    Flag(
        "--strictDequeueMode",
        "strict_dequeue_mode",
        "admitted units (and Reserved ones once their admission checks are all Ready) go to "
        "SchedReady, their workload waiting for the scheduler's SchedSucceed, instead of "
        "Dequeued; Koord-Queue's flag",
        _DEFAULTS.strict_dequeue_mode,
        _bool,
    ),
    Flag(
        "--queue-list",
        "queue_list",
        "comma-separated Queues --strictDequeueMode applies to (empty: every queue)",
        _DEFAULTS.queue_list,
        str,
    ),
    Flag(
        "--backoff-base-seconds",
        "backoff_base_seconds",
        "first back-off (status.requeueState) after a Retry or Rejected admission check; "
        "doubles per attempt up to 15 min (Koord-Queue's 10 s)",
        _DEFAULTS.backoff_base_seconds,
        _positive,
    ),
    Flag(
        "--enableApiHandler",
        "enable_api_handler",
        "serve the read-only debug API (GET /apis/v1/elasticquota: each quota's min, max, "
        "used and its split, and the units it holds) on --api-handler-port, Koord-Queue's flag",
        _DEFAULTS.enable_api_handler,
        _bool,
    ),
    Flag(
        "--api-handler-port",
        "api_handler_port",
        "port of the debug API (--enableApiHandler; Koord-Queue's is 19876)",
        _DEFAULTS.api_handler_port,
        int,
    ),
    Flag(
        "--resync-period",
        "resync_period",
        "seconds between full re-lists (repairs missed events)",
        _DEFAULTS.resync_period,
        _positive,
    ),
    Flag(
        "--metrics-port",
        "metrics_port",
        "port of the Prometheus /metrics endpoint (0: off)",
        _DEFAULTS.metrics_port,
        int,
    ),
    Flag(
        "--health-port",
        "health_port",
        "port of the /healthz liveness endpoint (0: off)",
        _DEFAULTS.health_port,
        int,
    ),
    Flag(
        "--log-format",
        "log_format",
        "log output format",
        _DEFAULTS.log_format,
        str,
        ("json", "console"),
    ),
    Flag(
        "--log-level",
        "log_level",
        "minimum log level",
        _DEFAULTS.log_level,
        str,
        ("debug", "info", "warning", "error"),
    ),
    Flag(
        "--manage-jobs",
        "manage_jobs",
        "create QueueUnits for batch/v1 Jobs created suspended",
        _DEFAULTS.manage_jobs,
        _bool,
    ),
    Flag(
        "--suspend-at-creation",
        "suspend_at_creation",
        "the workload webhook suspends a workload that names a quota when it is created, so "
        "it is queued (Kueue's rule); false: only workloads created suspended are queued "
        "(Koord-Queue's rule) and one created running gets a RunsOutsideQuota warning",
        _DEFAULTS.suspend_at_creation,
        _bool,
    ),
    Flag(
        "--integrations",
        "integrations",
        "comma-separated job kinds to queue: batch/job, kubeflow.org/pytorchjob, "
        "kubeflow.org/mpijob, jobset.x-k8s.io/jobset, pod (a kind whose CRD is not installed "
        "is skipped with one log line)",
        _DEFAULTS.integrations,
        _integrations,
    ),
    Flag(
        "--scheduler-name",
        "scheduler_name",
        "the scheduler places pods whose spec.schedulerName is this",
        _DEFAULTS.scheduler_name,
    ),
    Flag(
        "--schedule-period",
        "schedule_period",
        "at most this many seconds between scheduling sessions (a session also starts when "
        "pending work arrives)",
        _DEFAULTS.schedule_period,
        _positive,
    ),
    Flag(
        "--schedule-batch-gap",
        "schedule_batch_gap",
        "seconds from the arrival of pending work (a new pod, freed room, a node or queue "
        "change) to the session that places it; a burst arriving within it shares one session",
        _DEFAULTS.schedule_batch_gap,
        _positive,
    ),
    Flag(
        "--scheduler-conf",
        "scheduler_conf",
        "scheduler configuration YAML (actions, tiers; hot-reloaded; default: built-in)",
        None,
    ),
    Flag(
        "--feature-gates",
        "feature_gates",
        "comma-separated Name=true|false: "
        + ", ".join(f"{name} ({spec.stage.lower()}, default {str(spec.default).lower()})"
                    for name, spec in KNOWN.items())
        + "; MaximumExecutionTime needs QueueUnitActive and QueueUnitConditions, "
        "QueueUnitRequeueState needs QueueUnitConditions",
        _DEFAULTS.feature_gates,
        _feature_gates,
    ),
    Flag(
        "--gate-removal-worker-num",
        "gate_removal_worker_num",
        "workers removing scheduling gates (200 queued operations each)",
        _DEFAULTS.gate_removal_worker_num,
        int,
    ),
    Flag(
        "--gate-reservation-timeout",
        "gate_reservation_timeout",
        "seconds a pod admitted through the scheduling gate may hold its queue reservation "
        "without being placed; then the reservation is released with a ReservationExpired "
        "event and the pod, still pending, waits like any pod (0: never)",
        _DEFAULTS.gate_reservation_timeout,
        _non_negative,
    ),
    Flag(
        "--webhook-port",
        "webhook_port",
        "port of the admission webhooks (TLS; 0: off): ElasticQuota validation, workload "
        "defaulting, Deployment/StatefulSet/LeaderWorkerSet marking and the pod gates, at "
        "/validate-elasticquotas, /mutate-workloads, /mutate-pod-parents and /mutate-pods/gate",
        _DEFAULTS.webhook_port,
        int,
    ),
    Flag(
        "--webhook-cert",
        "webhook_cert",
        "webhook serving certificate (PEM; default: self-signed with the openssl CLI)",
        None,
    ),
    Flag("--webhook-key", "webhook_key", "webhook serving private key (PEM)", None),
    Flag(
        "--visibility-port",
        "visibility_port",
        "port of the visibility API (HTTPS, an aggregated API group registered by an "
        "APIService: pending units in round order; 0: off; needs --visibility-cert/-key)",
        _DEFAULTS.visibility_port,
        int,
    ),
    Flag("--visibility-cert", "visibility_cert", "visibility API serving certificate (PEM)",
         None),
    Flag("--visibility-key", "visibility_key", "visibility API serving private key (PEM)",
         None),
    Flag(
        "--leader-elect",
        "leader_elect",
        "active/standby: act only while holding a coordination.k8s.io Lease (run 2 replicas)",
        _DEFAULTS.leader_elect,
        _bool,
    ),
    Flag(
        "--leader-elect-lease-duration",
        "leader_elect_lease_duration",
        "seconds a standby waits after the leader's last renewal before taking over",
        _DEFAULTS.leader_elect_lease_duration,
        _positive,
    ),
    Flag(
        "--leader-elect-renew-deadline",
        "leader_elect_renew_deadline",
        "seconds a leader keeps acting without a successful renewal; then it stops writing and "
        "exits (must be < the lease duration)",
        _DEFAULTS.leader_elect_renew_deadline,
        _positive,
    ),
    Flag(
        "--leader-elect-retry-period",
        "leader_elect_retry_period",
        "seconds between attempts to acquire or renew the lease",
        _DEFAULTS.leader_elect_retry_period,
        _positive,
    ),
    Flag(
        "--leader-elect-resource-name",
        "leader_elect_resource_name",
        "name of the Lease (default: koord-queue for run, koord-queue-scheduler for schedule)",
        _DEFAULTS.leader_elect_resource_name,
    ),
    Flag(
        "--leader-elect-resource-namespace",
        "leader_elect_resource_namespace",
        "namespace of the Lease (default: --namespace)",
        _DEFAULTS.leader_elect_resource_namespace,
    ),
)


def flags_of(settings_type: type[SchedulerSettings]) -> tuple[Flag, ...]:
    """The flags that fill `settings_type` (one per field, in FLAGS' order)."""
    names = {f.name for f in fields(settings_type)}
    return tuple(flag for flag in FLAGS if flag.dest in names)


def add_flags(parser: argparse.ArgumentParser, settings_type: type[SchedulerSettings]) -> None:
    """Register the flags of `settings_type`; each may also come from its KOORDQUEUE_*
    environment variable. An environment value is left a string for argparse to convert
    when the flag is not given, so a bad one is refused like the flag (usage error, exit 2)
    instead of a traceback while the parser is built."""
    for flag in flags_of(settings_type):
        default = os.environ.get(flag.env, flag.default)
        parser.add_argument(
            flag.name,
            dest=flag.dest,
            default=default,
            type=flag.type,
            choices=flag.choices,
            help=f"{flag.help} (env {flag.env}; default: {flag.default})",
        )


def settings_from_args(args: argparse.Namespace, settings_type: type[S]) -> S:
    """The command's settings, once, from its parsed flags."""
    values = {flag.dest: getattr(args, flag.dest) for flag in flags_of(settings_type)}
    return settings_type(**values)


def flags_reference_markdown() -> str:
    """The configuration reference in docs/, generated from FLAGS (kept in sync by a test)."""
    lines = [
        "# Configuration reference: `koordqueue run` and `koordqueue schedule`",
        "",
        "Generated from `koordqueue/cli/flags.py`; do not edit by hand "
        "(`python -m koordqueue.cli.flags > docs/configuration.md`). `run` takes every flag "
        "(it runs the controller and the scheduler); `schedule` only those it reads.",
        "",
        "| flag | environment | default | commands | meaning |",
        "|---|---|---|---|---|",
    ]
    taking = {name: {f.dest for f in flags_of(t)} for name, t in COMMANDS.items()}
    for flag in FLAGS:
        default = "" if flag.default is None else f"`{flag.default}`"
        commands = ", ".join(name for name, dests in taking.items() if flag.dest in dests)
        lines.append(f"| `{flag.name}` | `{flag.env}` | {default} | {commands} | {flag.help} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(flags_reference_markdown(), end="")
