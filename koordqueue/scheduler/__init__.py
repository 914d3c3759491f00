"""Volcano-style batch scheduler core: a pure framework (plain data in, decisions out).

Entry point: `run_session(snapshot, config) -> SessionResult`. The Kubernetes adapter builds
a `ClusterSnapshot` from its informers and applies the result's binds, evictions, PodGroup
phase updates and fit errors; nothing here talks to the API server.
"""

from koordqueue.scheduler.framework import (
    Bind,
    ClusterSnapshot,
    ConfigError,
    ConfigWatcher,
    Eviction,
    PhaseUpdate,
    Reservation,
    SchedulerConfig,
    SessionResult,
    default_config,
    load_config,
    parse_config,
    run_session,
)

__all__ = [
    "Bind",
    "ClusterSnapshot",
    "ConfigError",
    "ConfigWatcher",
    "Eviction",
    "PhaseUpdate",
    "Reservation",
    "SchedulerConfig",
    "SessionResult",
    "default_config",
    "load_config",
    "parse_config",
    "run_session",
]
