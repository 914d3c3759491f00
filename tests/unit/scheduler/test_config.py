"""Configuration: tiers, arguments, switches, defaults, errors and hot reload."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from koordqueue.scheduler import ConfigError, ConfigWatcher, default_config, parse_config
from koordqueue.scheduler.framework import ExtensionPoint

CONFIG = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
- plugins:
  - name: binpack
    arguments:
      binpack.weight: 10
  - name: capacity
    enableHierarchy: true
"""


def test_config_parses_actions_and_tiers_in_order() -> None:
    cfg = parse_config(CONFIG)
    assert cfg.actions == ("enqueue", "allocate", "preempt")
    assert [[p.name for p in t.plugins] for t in cfg.tiers] == [
        ["priority", "gang"],
        ["binpack", "capacity"],
    ]


def test_plugin_arguments_are_kept() -> None:
    binpack = parse_config(CONFIG).tiers[1].plugins[0]
    assert binpack.arguments.get_float("binpack.weight", 1.0) == 10.0


def test_explicit_switch_disables_one_extension_point_only() -> None:
    gang = parse_config(CONFIG).tiers[0].plugins[1]
    assert not gang.enabled(ExtensionPoint.PREEMPTABLE)
    assert gang.enabled(ExtensionPoint.JOB_READY)


def test_unset_switches_mean_enabled_except_hierarchy() -> None:
    priority = parse_config(CONFIG).tiers[0].plugins[0]
    assert all(priority.enabled(p) for p in ExtensionPoint if p is not ExtensionPoint.HIERARCHY)
    assert not priority.enabled(ExtensionPoint.HIERARCHY)
    assert parse_config(CONFIG).tiers[1].plugins[1].enabled(ExtensionPoint.HIERARCHY)


def test_volcano_enabled_spelling_is_accepted() -> None:
    cfg = parse_config("tiers:\n- plugins:\n  - name: proportion\n    enabledOverused: false\n")
    assert not cfg.tiers[0].plugins[0].enabled(ExtensionPoint.OVERUSED)


def test_default_configuration_matches_the_spec() -> None:
    cfg = default_config()
    assert cfg.actions == ("enqueue", "allocate", "backfill")
    assert [[p.name for p in t.plugins] for t in cfg.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]


def test_bad_yaml_is_reported_with_its_line() -> None:
    with pytest.raises(ConfigError, match=r"sched.yaml: bad YAML at line 2, column 8"):
        parse_config('actions: "allocate"\ntiers: : x\n', "sched.yaml")


def test_unknown_plugin_is_rejected_by_name() -> None:
    with pytest.raises(ConfigError, match=r"tiers\[0\]\.plugins\[0\]: unknown plugin 'nope'"):
        parse_config("tiers:\n- plugins:\n  - name: nope\n")


def test_unknown_action_is_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown action 'reschedule'"):
        parse_config('actions: "allocate, reschedule"\n')


def test_misspelt_switch_is_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown key 'enablePredicat'"):
        parse_config("tiers:\n- plugins:\n  - name: gang\n    enablePredicat: false\n")


def test_non_boolean_switch_is_rejected() -> None:
    with pytest.raises(ConfigError, match="must be true or false"):
        parse_config("tiers:\n- plugins:\n  - name: gang\n    enableJobOrder: maybe\n")


def _write(path: Path, text: str, bump: int) -> None:
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump * 1_000_000_000))


def test_watcher_reloads_the_file_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    _write(path, 'actions: "allocate"\ntiers: []\n', 0)
    watcher = ConfigWatcher(path)
    assert watcher.current.actions == ("allocate",)
    assert watcher.poll() is False
    _write(path, 'actions: "enqueue, allocate"\ntiers: []\n', 5)
    assert watcher.poll() is True
    assert list(watcher.current.actions) == ["enqueue", "allocate"]


def test_watcher_keeps_the_old_config_on_bad_yaml_and_reports_it(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    _write(path, 'actions: "allocate"\ntiers: []\n', 0)
    errors: list[ConfigError] = []
    watcher = ConfigWatcher(path, on_error=errors.append)
    _write(path, "actions: [unclosed\n", 5)
    assert watcher.poll() is False
    assert watcher.current.actions == ("allocate",)
    assert watcher.last_error is not None and "bad YAML" in str(watcher.last_error)
    assert len(errors) == 1
    _write(path, 'actions: "backfill"\n', 10)
    assert watcher.poll() is True
    assert watcher.last_error is None


def test_watcher_starts_from_the_default_when_the_file_is_missing(tmp_path: Path) -> None:
    watcher = ConfigWatcher(tmp_path / "absent.yaml")
    assert watcher.current == default_config()
    assert watcher.last_error is not None and "cannot read" in str(watcher.last_error)


def test_watcher_clears_the_error_when_a_bad_edit_is_reverted(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    good = 'actions: "allocate"\ntiers: []\n'
    _write(path, good, 0)
    watcher = ConfigWatcher(path)
    _write(path, "actions: [unclosed\n", 5)
    watcher.poll()
    _write(path, good, 10)
    assert watcher.poll() is False
    assert watcher.last_error is None
    assert watcher.generation == 1
