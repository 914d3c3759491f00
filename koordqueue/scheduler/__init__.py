"""Volcano-style batch scheduler core: a pure framework (plain data in, decisions out).

Entry point: `run_session(snapshot, config) -> SessionResult`. The Kubernetes adapter builds
a `ClusterSnapshot` from its informers and applies the result's binds, evictions, PodGroup
phase updates and fit errors; nothing here talks to the API server.

Importing this package registers the built-in actions and plugins (their factories), as
Volcano's command imports its actions and plugins packages: the framework imports none.
"""

from koordqueue.scheduler.actions.factory import register_builtin_actions
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
from koordqueue.scheduler.plugins.factory import register_builtin_plugins

register_builtin_actions()
register_builtin_plugins()

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
