"""Bad scenario input: exit code 2 and a message naming file:line: field (issue 7)."""

from __future__ import annotations

import pytest

from tests.unit.cli.helpers import BAD_INPUTS, run

# file -> (line, field, reason fragment). Lines are 1-based lines of the file in bad-inputs/.
CASES = {
    "malformed-yaml.yaml": (5, "<yaml>", "expected ',' or '}'"),
    "unknown-field.yaml": (5, "quotas[0].maximum", "unknown field"),
    "bad-quantity.yaml": (6, "quotas[0].max.memory", "'12 gigs'"),
    "negative-quantity.yaml": (9, "units[0].resource.cpu", "must not be negative"),
    "negative-arrive.yaml": (9, "units[0].arrive", "must be an integer >= 0, got -3"),
    "wrong-type-priority.yaml": (8, "units[0].priority", "must be an integer"),
    "wrong-type-quotas.yaml": (2, "quotas", "must be a list"),
    # the YAML loader reports duplicates before it knows the path: the key, not quotas[0].parent
    "duplicate-key.yaml": (6, "parent", "duplicate key"),
    "missing-name.yaml": (3, "quotas[0].name", "must be a non-empty string"),
    "annotation-not-string.yaml": (
        6, "quotas[0].annotations.koord-queue/max-depth", "values must be strings"
    ),
    "not-a-map.yaml": (1, "<document>", "must be a map"),
    "bad-oversellrate.yaml": (2, "oversellRate", "must be a number"),
}


def test_every_bad_input_file_has_a_case() -> None:
    assert sorted(p.name for p in BAD_INPUTS.glob("*.yaml")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulate_names_file_line_and_field_and_exits_2(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    line, field, reason = CASES[name]
    path = BAD_INPUTS / name
    result = run(capsys, "simulate", path)
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith(f"koordqueue: error: {path}:{line}: {field}: ")
    assert reason in result.err


@pytest.mark.parametrize("name", ["unknown-field.yaml", "negative-quantity.yaml"])
def test_explain_reports_bad_scenarios_the_same_way(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    line, field, _ = CASES[name]
    path = BAD_INPUTS / name
    result = run(capsys, "explain", "--scenario", path, "default/job")
    assert result.code == 2
    assert f"{path}:{line}: {field}: " in result.err


def test_missing_scenario_file_exits_2_naming_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    result = run(capsys, "simulate", "/nonexistent/scenario.yaml")
    assert result.code == 2
    assert "/nonexistent/scenario.yaml: <file>: No such file or directory" in result.err
