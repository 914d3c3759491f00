"""Names of Volcano's load-aware and external plugins (usage, rescheduling, extender) and of
the scheduler conf's `metrics` section: arguments and refusals, spelled as Volcano spells
them (pkg/scheduler/plugins/<name>, pkg/scheduler/metrics/source) so a user's
volcano-scheduler.conf works unchanged.
"""

from __future__ import annotations

from typing import Final

# --- usage -------------------------------------------------------------------------------------
USAGE: Final = "usage"
USAGE_WEIGHT: Final = "usage.weight"
USAGE_CPU_WEIGHT: Final = "cpu.weight"
USAGE_MEMORY_WEIGHT: Final = "memory.weight"
USAGE_THRESHOLDS: Final = "thresholds"
USAGE_THRESHOLD_CPU: Final = "cpu"
USAGE_THRESHOLD_MEMORY: Final = "mem"
USAGE_DEFAULT_WEIGHT: Final = 5
USAGE_DEFAULT_RESOURCE_WEIGHT: Final = 1
USAGE_DEFAULT_THRESHOLD: Final = 80
ERR_USAGE_CPU: Final = "the CPU load of the node exceeds the upper limit."
ERR_USAGE_MEMORY: Final = "the memory load of the node exceeds the upper limit."
ERR_USAGE: Final = "plugin usage predicates failed, because of {reason}"

# --- the conf's metrics section ----------------------------------------------------------------
METRICS: Final = "metrics"
METRICS_PROMETHEUS: Final = "prometheus"
METRICS_PROMETHEUS_ADAPTOR: Final = "prometheus_adaptor"
METRICS_ELASTICSEARCH: Final = "elasticsearch"
METRICS_SERVER: Final = "metrics_server"
"""koordqueue's own type: metrics.k8s.io NodeMetrics (a point-in-time reading, not an average)."""
METRICS_TYPES: Final = (METRICS_PROMETHEUS, METRICS_PROMETHEUS_ADAPTOR, METRICS_SERVER)
METRICS_DEFAULT_INTERVAL: Final = 30.0
METRICS_PERIOD: Final = "10m"
"""The window Volcano averages node load over (NODE_METRICS_PERIOD)."""

# --- rescheduling ------------------------------------------------------------------------------
RESCHEDULING: Final = "rescheduling"
RESCHEDULING_INTERVAL: Final = "interval"
RESCHEDULING_STRATEGIES: Final = "strategies"
RESCHEDULING_DEFAULT_INTERVAL: Final = 300.0
LOW_NODE_UTILIZATION: Final = "lowNodeUtilization"

# --- extender ----------------------------------------------------------------------------------
EXTENDER: Final = "extender"
EXTENDER_URL_PREFIX: Final = "extender.urlPrefix"
EXTENDER_HTTP_TIMEOUT: Final = "extender.httpTimeout"
EXTENDER_IGNORABLE: Final = "extender.ignorable"
EXTENDER_MANAGED_RESOURCES: Final = "extender.managedResources"
EXTENDER_VERBS: Final = (
    "onSessionOpen", "onSessionClose", "predicate", "prioritize", "preemptable",
    "reclaimable", "queueOverused", "jobEnqueueable", "jobReady",
)
"""`extender.<verb>Verb` arguments: each names the path the extender serves that verb at."""
EXTENDER_DEFAULT_TIMEOUT: Final = 1.0
ERR_EXTENDER_CALL: Final = "extender: {verb} at {url} failed: {error}"
ERR_EXTENDER_STATUS: Final = "failed {verb} with extender at URL {url}, code {code}"
