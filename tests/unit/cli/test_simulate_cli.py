"""`koordqueue simulate` extras: --plot, --progress; and the other subcommands still work."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest

from koordqueue.cli.plot import timeline
from koordqueue.simulation.scenario import load_scenario
from koordqueue.simulation.simulator import simulate
from tests.unit.cli.helpers import EXAMPLES, run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_plot_writes_a_png_and_still_prints_the_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "timeline.png"
    result = run(capsys, "simulate", "--plot", target)
    assert result.code == 0, result.err
    assert target.read_bytes().startswith(PNG_MAGIC)
    assert "== step 0" in result.out


def test_plot_of_another_resource(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "memory.png"
    result = run(capsys, "simulate", EXAMPLES / "hierarchy.yaml", "--plot", target,
                 "--plot-resource", "memory")
    assert result.code == 0 and target.read_bytes().startswith(PNG_MAGIC)


def test_plot_without_matplotlib_fails_with_install_hint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = run(capsys, "simulate", "--plot", tmp_path / "x.png")
    assert result.code == 1
    assert "pip install 'koordqueue[plot]'" in result.err
    assert not (tmp_path / "x.png").exists()


def test_plot_into_a_missing_directory_fails_cleanly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    result = run(capsys, "simulate", "--plot", tmp_path / "no" / "such" / "dir.png")
    assert result.code == 1 and "cannot write" in result.err


def test_timeline_is_used_cpu_per_step_against_min_and_max() -> None:
    result = simulate(load_scenario(EXAMPLES / "hierarchy.yaml"))
    series = {s.quota: s for s in timeline(result)}
    org = series["org"]
    assert org.steps == (0, 1, 2, 3, 4, 5)
    assert org.used == (8.0, 8.0, 6.5, 1.0, 1.0, 1.0)
    assert (org.min, org.max) == (4.0, 8.0)
    assert series["team-c"].min is None


def test_progress_is_silent_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run(capsys, "simulate", "--progress")
    assert result.code == 0 and result.err == ""


def test_version_and_simulate_json_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "version").out.startswith("koordqueue ")
    doc = json.loads(run(capsys, "simulate", "-o", "json").out)
    assert doc["scenario"] == "hierarchy"


def test_preempted_victim_final_phase_is_enqueued() -> None:
    result = simulate(load_scenario(EXAMPLES / "preemption.yaml"))
    assert result.final_phases()["ml/batch"] == "Enqueued"
