"""Golden outputs: the CLI on every docs/examples/*.yaml, compared with checked-in files.

Regenerate with `KOORDQUEUE_UPDATE_GOLDEN=1 pytest tests/unit/cli/test_golden.py`, then review
the diff against SPEC before checking it in: a golden file is a claim about behaviour.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.cli.helpers import EXAMPLES, GOLDEN, ROOT, run

UPDATE = os.environ.get("KOORDQUEUE_UPDATE_GOLDEN") == "1"
SCENARIOS = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))

# (example, unit, step or None): one explain case per pending reason the examples show.
EXPLAIN_CASES = [
    ("hierarchy", "ml/a-eval", 1),  # ancestor org exhausted, team-a has room
    ("hierarchy", "ml/c-job", None),  # missing ancestor, verbatim message
    ("hierarchy", "ml/stray", None),  # QueueNotFound
    ("hierarchy", "ml/unlabeled", None),  # no label: status message only
    ("hierarchy", "data/b-report", None),  # admitted
    ("policies", "prio/big", 1),  # own quota full
    ("policies", "block/small", 1),  # Block head-of-line
    ("policies", "intel/mid", 1),  # Intelligent high sub-queue
    ("policies", "shallow/small", None),  # beyond max-depth
    ("preemption", "ml/batch", None),  # preempted, back in queue, quota full
    ("preemption", "web/worker", None),  # wait-for-pods-running
    ("quota-errors", "ops/looped", None),  # cycle, verbatim message
    ("whatif-snapshot", "team-a/sweep-job-qu", None),  # a snapshot: team-a full of held units
    ("whatif-snapshot", "team-a/train-1-job-qu", None),  # held from the snapshot: admitted
    ("quota-errors", "ops/nothing-allowed", None),  # empty max
    ("quota-errors", "ops/unserved", None),  # AddQueueFail
    ("quota-errors", "ops/typo", None),  # invalid label value
    ("pipeline", "ml/gpu-job", 1),  # waits for the org quota while train and etl run
    ("pipeline", "ml/train", None),  # admitted and placed, then finished
    ("numa", "ml/c", 2),  # admitted, Unschedulable: numa-aware finds no NUMA node
    ("usage", "web/pinned", 0),  # admitted, Unschedulable: usage refuses the hot node
]


def _compare(actual: str, path: Path) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"missing golden file {path}; run with KOORDQUEUE_UPDATE_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"output differs from {path} (KOORDQUEUE_UPDATE_GOLDEN=1 to update)"


@pytest.fixture(autouse=True)
def _at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths in the output are the ones given on the command line: keep them relative."""
    monkeypatch.chdir(ROOT)


def test_there_are_examples_and_every_one_has_explain_cases() -> None:
    assert {"hierarchy", "policies", "preemption"} <= set(SCENARIOS)
    assert {case[0] for case in EXPLAIN_CASES} == set(SCENARIOS)


@pytest.mark.parametrize("output", ["table", "json"])
@pytest.mark.parametrize("example", SCENARIOS)
def test_simulate_matches_golden(
    capsys: pytest.CaptureFixture[str], example: str, output: str
) -> None:
    result = run(capsys, "simulate", f"docs/examples/{example}.yaml", "-o", output)
    assert result.code == 0, result.err
    suffix = "txt" if output == "table" else "json"
    _compare(result.out, GOLDEN / "simulate" / f"{example}.{suffix}")


@pytest.mark.parametrize("output", ["table", "json"])
@pytest.mark.parametrize(("example", "unit", "step"), EXPLAIN_CASES)
def test_explain_matches_golden(
    capsys: pytest.CaptureFixture[str], example: str, unit: str, step: int | None, output: str
) -> None:
    argv = ["explain", "--scenario", f"docs/examples/{example}.yaml", unit, "-o", output]
    if step is not None:
        argv += ["--step", str(step)]
    result = run(capsys, *argv)
    assert result.code == 0, result.err
    name = unit.replace("/", "_") + ("" if step is None else f"@{step}")
    suffix = "txt" if output == "table" else "json"
    _compare(result.out, GOLDEN / "explain" / example / f"{name}.{suffix}")


def test_default_simulate_is_the_hierarchy_example(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's first command (`koordqueue simulate`) shows docs/examples/hierarchy.yaml."""
    embedded = run(capsys, "simulate", "-o", "json")
    from_file = run(capsys, "simulate", "docs/examples/hierarchy.yaml", "-o", "json")
    assert embedded.code == from_file.code == 0
    assert embedded.out == from_file.out
