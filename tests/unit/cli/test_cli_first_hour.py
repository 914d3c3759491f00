"""What a new operator types first: `--version`, and a kubeconfig that is not there (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordqueue import __version__
from koordqueue.cli.main import main

QUIET = ["--metrics-port=0", "--health-port=0"]


def test_dash_dash_version_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"koordqueue {__version__}"


@pytest.mark.parametrize("command", ["run", "schedule"])
def test_a_missing_kubeconfig_is_named(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope" / "kubeconfig"
    assert main([command, f"--kubeconfig={missing}", *QUIET]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"koordqueue {command}: error: kubeconfig {missing}: no such file"


@pytest.mark.parametrize("command", ["run", "schedule"])
def test_an_unparseable_kubeconfig_is_named_on_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [\n")
    assert main([command, f"--kubeconfig={bad}", *QUIET]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"koordqueue {command}: error: kubeconfig {bad}: ")
    assert "\n" not in err
