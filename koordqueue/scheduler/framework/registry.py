"""Builders for plugins and actions, registered from outside (Volcano's framework registry).

The framework knows no plugin or action: the built-ins register themselves from their
factories (`scheduler/plugins/factory.py`, `scheduler/actions/factory.py`, which the
`koordqueue.scheduler` package imports), third-party plugins through the `koordqueue.plugins`
entry points. Entry points are read once (lazily) through importlib.metadata; each one names
a plugin and points at a builder: a callable taking `Arguments` (a Plugin subclass is such a
callable). A name registered in code wins over an entry point of the same name.
"""

from __future__ import annotations

import importlib.metadata
import threading

import structlog

from koordqueue.scheduler.api import names
from koordqueue.scheduler.framework.interface import Action, PluginBuilder

_log = structlog.get_logger(__name__)


class UnknownPluginError(LookupError):
    """No registered or entry-point plugin has this name."""

    def __init__(self, name: str, known: list[str], load_errors: dict[str, str]) -> None:
        self.plugin = name
        self.known = known
        self.load_error = load_errors.get(name)
        detail = f"; loading its entry point failed: {self.load_error}" if self.load_error else ""
        super().__init__(f"unknown plugin {name!r} (known: {', '.join(known)}){detail}")


class _Loaded:
    """What has been loaded so far (module state without `global`)."""

    entry_points = False


_lock = threading.Lock()
_plugins: dict[str, PluginBuilder] = {}
_actions: dict[str, Action] = {}
_entry_point_errors: dict[str, str] = {}


def register_plugin_builder(name: str, builder: PluginBuilder) -> None:
    """Register (or replace) a plugin builder under `name`."""
    with _lock:
        _plugins[name] = builder


def unregister_plugin_builder(name: str) -> None:
    """Forget a registered builder (tests)."""
    with _lock:
        _plugins.pop(name, None)


def register_action(action: Action) -> None:
    """Register (or replace) an action under its name."""
    with _lock:
        _actions[action.name] = action


def load_entry_point_plugins(*, reload: bool = False) -> dict[str, str]:
    """Import the builders of the `koordqueue.plugins` group; return name -> error for failures.

    A broken third-party package must not take the scheduler down: its plugin is simply
    unknown, and the configuration that names it is rejected with the import error.
    """
    with _lock:
        if _Loaded.entry_points and not reload:
            return dict(_entry_point_errors)
        _entry_point_errors.clear()
        for ep in importlib.metadata.entry_points(group=names.PLUGIN_ENTRY_POINT_GROUP):
            try:
                builder = ep.load()
            except Exception as exc:
                _entry_point_errors[ep.name] = f"{type(exc).__name__}: {exc}"
                _log.warning("plugin entry point failed to load", plugin=ep.name, error=str(exc))
                continue
            if not callable(builder):
                _entry_point_errors[ep.name] = f"{ep.value} is not callable"
                continue
            _plugins.setdefault(ep.name, builder)
        _Loaded.entry_points = True
        return dict(_entry_point_errors)


def get_plugin_builder(name: str) -> PluginBuilder:
    """The builder for `name`, searching registrations, then entry points."""
    builder = _plugins.get(name)
    if builder is None:
        load_entry_point_plugins()
        builder = _plugins.get(name)
    if builder is None:
        raise UnknownPluginError(name, sorted(_plugins), _entry_point_errors)
    return builder


def get_action(name: str) -> Action:
    """The action registered under `name`."""
    try:
        return _actions[name]
    except KeyError:
        raise LookupError(f"unknown action {name!r}") from None


def action_names() -> frozenset[str]:
    """Names of all registered actions."""
    return frozenset(_actions)
