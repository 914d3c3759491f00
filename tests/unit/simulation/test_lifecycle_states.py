"""Issue 35: `simulate` and `explain` know the new states (an inactive unit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordqueue.cli.main import main

SCENARIO = """
name: inactive
steps: 2
quotas:
  - name: q
    max: {cpu: "2"}
units:
  - name: sleeper
    quota: q
    resource: {cpu: "2"}
    annotations: {scheduling.x-k8s.io/active: "false"}
  - name: rival
    quota: q
    resource: {cpu: "2"}
    arrive: 1
"""


def test_simulate_and_explain_say_a_unit_born_inactive_waits_and_the_rival_gets_the_quota(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "default/rival     Dequeued" in out
    assert "default/sleeper   Enqueued   inactive (spec.active is false)" in out
    assert main(["explain", "--scenario", str(path), "-n", "default", "sleeper"]) == 0
    out = capsys.readouterr().out
    assert "Reason:     Inactive" in out
