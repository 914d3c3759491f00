"""Prometheus metrics of the scheduler (SPEC 3.1), on the shared registry."""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from koordqueue.kube.metrics import REGISTRY

_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

SESSION_DURATION: Final = Histogram(
    "koordqueue_scheduler_session_duration_seconds",
    "One session end to end: snapshot, actions and plugins (without applying decisions).",
    buckets=_BUCKETS, registry=REGISTRY,
)
ACTION_DURATION: Final = Histogram(
    "koordqueue_scheduler_action_duration_seconds", "Time spent in each action per session.",
    ["action"], buckets=_BUCKETS, registry=REGISTRY,
)
PLUGIN_DURATION: Final = Histogram(
    "koordqueue_scheduler_plugin_duration_seconds",
    "Time attributed to each plugin per session (open, close and callbacks).",
    ["plugin", "phase"], buckets=_BUCKETS, registry=REGISTRY,
)
APPLY_DURATION: Final = Histogram(
    "koordqueue_scheduler_apply_duration_seconds",
    "Writing one session's decisions (binds, evictions, conditions, phases).",
    buckets=_BUCKETS, registry=REGISTRY,
)
BINDS: Final = Counter(
    "koordqueue_scheduler_binds_total", "Bind calls by result.", ["result"], registry=REGISTRY
)
EVICTIONS: Final = Counter(
    "koordqueue_scheduler_evictions_total", "Evictions by reason.", ["reason"], registry=REGISTRY
)
UNSCHEDULABLE: Final = Gauge(
    "koordqueue_scheduler_unschedulable_pods", "Pods left unplaced by the last session.",
    registry=REGISTRY,
)
GATE_REMOVALS: Final = Counter(
    "koordqueue_gate_removals_total", "Gate removal attempts by result.", ["result"],
    registry=REGISTRY,
)
GATE_QUEUE_FULL: Final = Counter(
    "koordqueue_gate_removal_queue_full_total",
    "Gate removals not enqueued because the worker's queue was full (retried next session).",
    registry=REGISTRY,
)
