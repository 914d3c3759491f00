"""`--integrations`: a comma list of known job integration names; an unknown one is a CLI error."""

from __future__ import annotations

import argparse

import pytest

from koordqueue.cli.flags import add_flags, settings_from_args
from koordqueue.kube.settings import ControllerSettings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_flags(parser, ControllerSettings)
    return parser


def test_default_serves_batch_job_only() -> None:
    settings = settings_from_args(_parser().parse_args([]), ControllerSettings)
    assert settings.integrations == "batch/job"


def test_a_comma_list_is_normalised_in_order_without_repeats() -> None:
    args = _parser().parse_args(["--integrations", " pod,kubeflow.org/pytorchjob ,pod"])
    settings = settings_from_args(args, ControllerSettings)
    assert settings.integrations == "pod,kubeflow.org/pytorchjob"


def test_an_unknown_name_is_a_cli_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["--integrations", "batch/job,ray.io/rayservice"])
    assert exited.value.code == 2
    assert "unknown integrations ray.io/rayservice" in capsys.readouterr().err
