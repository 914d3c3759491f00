"""What a new operator types first: `--version`, and a kubeconfig that is not there (issue 33)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from koordqueue import __version__
from koordqueue.cli.main import main
from tests.unit.cli.helpers import ROOT

QUIET = ["--metrics-port=0", "--health-port=0"]


def test_dash_dash_version_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"koordqueue {__version__}"


def _koordqueue(*args: str) -> subprocess.CompletedProcess[str]:
    """In a process of its own: run/schedule set up the process's logging for good."""
    return subprocess.run(
        [sys.executable, "-m", "koordqueue.cli.main", *args, *QUIET],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": "/nonexistent"},
    )


@pytest.mark.parametrize("command", ["run", "schedule"])
def test_a_missing_kubeconfig_is_named(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "kubeconfig"
    result = _koordqueue(command, f"--kubeconfig={missing}")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"koordqueue {command}: error: kubeconfig {missing}: no such file")


@pytest.mark.parametrize("command", ["run", "schedule"])
def test_an_unparseable_kubeconfig_is_named_on_one_line(command: str, tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [\n")
    result = _koordqueue(command, f"--kubeconfig={bad}")
    assert result.returncode == 2, result.stderr
    err = result.stderr.strip()
    assert err.startswith(f"koordqueue {command}: error: kubeconfig {bad}: ")
    assert "\n" not in err
