"""Scheduler configuration: actions and tiers of plugins (SPEC 3.2), parsed from YAML."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from koordqueue.scheduler.api import names
from koordqueue.scheduler.framework.interface import KNOWN_SWITCHES, Arguments, ExtensionPoint
from koordqueue.scheduler.framework.metrics_config import MetricsConfig, parse_metrics


class ConfigError(ValueError):
    """A configuration that cannot be used; the message says where and why."""

    def __init__(self, source: str, detail: str) -> None:
        self.source = source
        self.detail = detail
        super().__init__(f"invalid scheduler configuration {source}: {detail}")


@dataclass(frozen=True, slots=True)
class PluginOption:
    """One plugin in a tier: its arguments and explicit per-extension-point switches."""

    name: str
    arguments: Arguments = field(default_factory=Arguments)
    switches: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, point: ExtensionPoint) -> bool:
        """An unset switch means enabled, except `enableHierarchy` (SPEC 3.6)."""
        value = self.switches.get(point.switch)
        return point.default_enabled if value is None else value


@dataclass(frozen=True, slots=True)
class Tier:
    """Plugins whose answers are combined before the next tier is asked."""

    plugins: tuple[PluginOption, ...]


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Actions in order and the plugin tiers."""

    actions: tuple[str, ...]
    tiers: tuple[Tier, ...]
    configurations: tuple[tuple[str, Arguments], ...] = ()
    """Volcano's `configurations`: per action name, its arguments (a tuple of pairs so the
    configuration stays hashable: the quiet memo keys on it)."""
    metrics: MetricsConfig | None = None
    """Volcano's `metrics` section: the node load source (None: no load is read)."""

    def action_arguments(self, action: str) -> Arguments:
        """The arguments the `configurations` list gives `action` (empty when none; the
        first entry of a name, as Volcano's GetArgOfActionFromConf)."""
        for name, arguments in self.configurations:
            if name == action:
                return arguments
        return Arguments()


DEFAULT_CONFIG_YAML: Final = f"""\
actions: "{names.DEFAULT_ACTIONS}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def _normalise_switch(key: str) -> str:
    # Volcano spells some switches "enabledX"; accept both spellings.
    return "enable" + key[len("enabled") :] if key.startswith("enabled") else key


def _parse_plugin(raw: object, where: str, source: str, validate: bool) -> PluginOption:
    if not isinstance(raw, Mapping):
        raise ConfigError(source, f"{where}: expected a map with 'name', got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(source, f"{where}: 'name' must be a non-empty string")
    arguments = raw.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        raise ConfigError(source, f"{where} ({name}): 'arguments' must be a map")
    switches: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        switch = _normalise_switch(str(key))
        if switch not in KNOWN_SWITCHES:
            raise ConfigError(source, f"{where} ({name}): unknown key {key!r}")
        if not isinstance(value, bool):
            raise ConfigError(
                source, f"{where} ({name}): {key} must be true or false, got {value!r}"
            )
        switches[switch] = value
    if validate:
        from koordqueue.scheduler.framework.registry import UnknownPluginError, get_plugin_builder

        try:
            get_plugin_builder(name)
        except UnknownPluginError as exc:
            raise ConfigError(source, f"{where}: {exc}") from exc
    return PluginOption(name, Arguments({str(k): v for k, v in arguments.items()}), switches)


def parse_config(text: str, source: str = "<string>", *, validate: bool = True) -> SchedulerConfig:
    """Parse a configuration document; raise ConfigError naming the line or field at fault.

    `validate` also checks that every action and plugin name is registered, so a typo is
    refused when the file is loaded, not silently ignored at the next session.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(source, f"bad YAML{where}: {problem}") from exc
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise ConfigError(source, f"expected a map at the top level, got {type(doc).__name__}")
    actions_raw = doc.get("actions", names.DEFAULT_ACTIONS)
    if isinstance(actions_raw, str):
        actions = tuple(a.strip() for a in actions_raw.split(",") if a.strip())
    elif isinstance(actions_raw, list) and all(isinstance(a, str) for a in actions_raw):
        actions = tuple(a.strip() for a in actions_raw)
    else:
        raise ConfigError(source, "'actions' must be a comma-separated string")
    if validate:
        from koordqueue.scheduler.framework.registry import action_names

        known = action_names()
        for action in actions:
            if action not in known:
                raise ConfigError(
                    source, f"unknown action {action!r} (known: {', '.join(sorted(known))})"
                )
    tiers_raw = doc.get("tiers", [])
    if not isinstance(tiers_raw, list):
        raise ConfigError(source, "'tiers' must be a list")
    tiers: list[Tier] = []
    for t, tier_raw in enumerate(tiers_raw):
        if not isinstance(tier_raw, Mapping) or not isinstance(tier_raw.get("plugins", []), list):
            raise ConfigError(source, f"tiers[{t}]: expected a map with a 'plugins' list")
        plugins = tuple(
            _parse_plugin(p, f"tiers[{t}].plugins[{i}]", source, validate)
            for i, p in enumerate(tier_raw.get("plugins") or [])
        )
        tiers.append(Tier(plugins))
    metrics = None
    if doc.get("metrics") is not None:
        try:
            metrics = parse_metrics(doc["metrics"])
        except ValueError as exc:
            raise ConfigError(source, str(exc)) from exc
    return SchedulerConfig(actions, tuple(tiers), _parse_configurations(doc, source), metrics)


def _parse_configurations(
    doc: Mapping[str, object], source: str
) -> tuple[tuple[str, Arguments], ...]:
    """Volcano's `configurations:` list (`- name: preempt`, `arguments: {...}`)."""
    raw = doc.get("configurations") or []
    if not isinstance(raw, list):
        raise ConfigError(source, "'configurations' must be a list")
    out: list[tuple[str, Arguments]] = []
    for i, entry in enumerate(raw):
        where = f"configurations[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfigError(source, f"{where}: expected a map with a 'name'")
        arguments = entry.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise ConfigError(source, f"{where} ({entry['name']}): 'arguments' must be a map")
        out.append((str(entry["name"]), Arguments({str(k): v for k, v in arguments.items()})))
    return tuple(out)


def load_config(path: str | Path) -> SchedulerConfig:
    """Read and parse a configuration file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(p), f"cannot read: {exc.strerror or exc}") from exc
    return parse_config(text, str(p))


def default_config() -> SchedulerConfig:
    """The default configuration of SPEC 3.2."""
    return parse_config(DEFAULT_CONFIG_YAML, "<default>")
