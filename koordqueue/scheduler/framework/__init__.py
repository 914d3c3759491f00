"""Session, statement, extension points, plugin registry and configuration."""

from koordqueue.scheduler.framework.config import (
    DEFAULT_CONFIG_YAML,
    ConfigError,
    PluginOption,
    SchedulerConfig,
    Tier,
    default_config,
    load_config,
    parse_config,
)
from koordqueue.scheduler.framework.interface import (
    Action,
    Arguments,
    ExtensionPoint,
    Plugin,
    PluginBuilder,
    ValidateResult,
    Vote,
)
from koordqueue.scheduler.framework.registry import (
    UnknownPluginError,
    get_plugin_builder,
    load_entry_point_plugins,
    register_action,
    register_plugin_builder,
)
from koordqueue.scheduler.framework.result import (
    Bind,
    ClusterSnapshot,
    Eviction,
    PhaseUpdate,
    PluginTiming,
    Reservation,
    SessionResult,
)
from koordqueue.scheduler.framework.session import (
    EventHandler,
    Session,
    open_session,
    run_actions,
    run_session,
)
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.framework.watcher import ConfigWatcher

__all__ = [
    "DEFAULT_CONFIG_YAML",
    "Action",
    "Arguments",
    "Bind",
    "ClusterSnapshot",
    "ConfigError",
    "ConfigWatcher",
    "EventHandler",
    "Eviction",
    "ExtensionPoint",
    "PhaseUpdate",
    "Plugin",
    "PluginBuilder",
    "PluginOption",
    "PluginTiming",
    "Reservation",
    "SchedulerConfig",
    "Session",
    "SessionResult",
    "Statement",
    "Tier",
    "UnknownPluginError",
    "ValidateResult",
    "Vote",
    "default_config",
    "get_plugin_builder",
    "load_config",
    "load_entry_point_plugins",
    "open_session",
    "parse_config",
    "register_action",
    "register_plugin_builder",
    "run_actions",
    "run_session",
]
