"""`run` and `schedule`: settings typed per command, one wiring function (issue 25, part 5).

Before, both commands registered every flag (`schedule --help` listed the controller's
`--admission-period`, `--oversellrate`, `--integrations`, ... which it never read) and
started through near-twin builders (cli/run.build_operator, scheduler/runner's
build_scheduler_operator). The help tests below fail at 5119b54 (checked: `schedule --help`
listed 34 flags there, among them every controller flag named here).
"""

from __future__ import annotations

import argparse
import ast
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

import koordqueue
import koordqueue.cli.run as cli_run
from koordqueue.cli.flags import FLAGS, settings_from_args
from koordqueue.cli.main import build_parser, main
from koordqueue.kube import process
from koordqueue.kube.settings import ControllerSettings, SchedulerSettings

CONTROLLER_ONLY = (
    "--oversellrate", "--enableParentLimit", "--admission-period", "--job-workers",
    "--api-writers", "--job-running-timeout", "--job-backoff-time", "--manage-jobs",
    "--suspend-at-creation", "--integrations",
)  # fmt: skip
SCHEDULER_FLAGS = (
    "--scheduler-name", "--schedule-period", "--schedule-batch-gap", "--scheduler-conf",
    "--feature-gates", "--gate-removal-worker-num", "--gate-reservation-timeout",
)  # fmt: skip
PACKAGE = Path(koordqueue.__file__).parent
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def _help_flags(command: str, capsys: pytest.CaptureFixture[str]) -> set[str]:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    return set(re.findall(r"^  (--[A-Za-z-]+)", capsys.readouterr().out, re.MULTILINE))


def test_schedule_help_lists_only_the_flags_the_scheduler_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    listed = _help_flags("schedule", capsys)
    assert listed >= {"--kubeconfig", "--leader-elect", "--webhook-port", *SCHEDULER_FLAGS}
    assert listed.isdisjoint(CONTROLLER_ONLY)
    assert listed == {f.name for f in FLAGS if f.dest in _field_names(SchedulerSettings)}


def test_run_help_lists_the_controllers_flags_and_its_schedulers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`run` runs the scheduler beside the controller, so it reads the scheduler's flags too;
    it lists each flag of its settings once, and nothing else."""
    listed = _help_flags("run", capsys)
    assert listed >= {*CONTROLLER_ONLY, *SCHEDULER_FLAGS}
    assert listed == {f.name for f in FLAGS}


def test_every_setting_has_exactly_one_flag() -> None:
    dests = [f.dest for f in FLAGS]
    assert len(dests) == len(set(dests))
    assert set(dests) == _field_names(ControllerSettings)


def test_a_controller_flag_is_a_usage_error_for_schedule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["schedule", "--admission-period", "2"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --admission-period" in capsys.readouterr().err


def test_each_command_parses_its_settings_once_into_its_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both commands start through kube/process.build_operator, with their settings type:
    run's runs the controller, schedule's only the scheduler (and freezes its cache)."""
    calls: list[tuple[Any, dict[str, Any]]] = []

    def record(settings: Any, **kwargs: Any) -> Any:
        calls.append((settings, kwargs))
        raise SystemExit(0)  # stop before serving

    monkeypatch.setattr(cli_run, "build_operator", record)
    monkeypatch.setattr(cli_run, "second_scheduler", lambda settings, lease: None)
    monkeypatch.setattr(cli_run, "configure_logging", lambda fmt, level: None)
    for argv in (["run", "--admission-period", "2"], ["schedule", "--schedule-period", "3"]):
        with pytest.raises(SystemExit):
            main(argv)
    (run_settings, run_kwargs), (schedule_settings, schedule_kwargs) = calls
    assert type(run_settings) is ControllerSettings and run_settings.admission_period == 2
    assert type(schedule_settings) is SchedulerSettings
    assert schedule_settings.schedule_period == 3
    assert run_kwargs["controller"] is True and run_kwargs["scheduler"] is True
    assert schedule_kwargs["controller"] is False and schedule_kwargs["scheduler"] is True
    assert run_kwargs["gc_freeze"] is True and schedule_kwargs["gc_freeze"] is True


def test_settings_from_args_builds_the_asked_type() -> None:
    args = argparse.Namespace(**{f.dest: f.default for f in FLAGS})
    assert type(settings_from_args(args, SchedulerSettings)) is SchedulerSettings
    assert type(settings_from_args(args, ControllerSettings)) is ControllerSettings


def test_one_wiring_function_for_every_combination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline (nothing is called before kopf starts but the namespace check, stubbed)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG, encoding="utf-8")
    monkeypatch.setattr(process, "ensure_namespace", lambda api, namespace: None)
    alone = process.build_operator(
        SchedulerSettings(kubeconfig=str(kubeconfig)), controller=False, scheduler=True
    )
    assert alone.controller is None and alone.scheduler is not None
    both = process.build_operator(
        ControllerSettings(kubeconfig=str(kubeconfig)), controller=True, scheduler=True
    )
    assert both.controller is not None and both.scheduler is not None
    assert list(both.controller.consumers) == ["Job"]
    controller_only = process.build_operator(
        ControllerSettings(kubeconfig=str(kubeconfig)), controller=True, scheduler=False
    )
    assert controller_only.scheduler is None
    with pytest.raises(TypeError, match="ControllerSettings"):
        process.build_operator(
            SchedulerSettings(kubeconfig=str(kubeconfig)), controller=True, scheduler=False
        )
    for operator in (alone, both, controller_only):
        if operator.scheduler is not None:
            operator.scheduler.close()
        if operator.controller is not None:
            operator.controller.close()


def test_no_scheduler_module_reads_the_controllers_settings() -> None:
    """The scheduler's side types its settings SchedulerSettings (or ProcessSettings), so
    mypy refuses a read of a controller flag there."""
    readers = []
    for path in sorted((PACKAGE / "kube" / "scheduler").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "koordqueue.kube.settings"
                and any(alias.name == "ControllerSettings" for alias in node.names)
            ):
                readers.append(path.name)
    assert readers == []


def _field_names(settings_type: type[Any]) -> set[str]:
    return {f.name for f in fields(settings_type)}
