"""The scenario's top-level lists (quotas, units, nodes): type errors name the list or entry."""

from __future__ import annotations

import pytest

from koordqueue.simulation.scenario import ScenarioError, parse_scenario

QUOTA = "quotas:\n  - name: q\n    max: {cpu: 1}\n"


@pytest.mark.parametrize(
    ("text", "line", "field", "reason"),
    [
        ("units: 3\n", 1, "units", "must be a list"),
        (QUOTA + "nodes: {a: 1}\n", 4, "nodes", "must be a list"),
        ("quotas:\n  - 7\n", 1, "quotas[0]", "must be a map"),
        (QUOTA + "units:\n  - [1]\n", 4, "units[0]", "must be a map"),
        (QUOTA + "nodes:\n  - name: n\n  - x\n", 4, "nodes[1]", "must be a map"),
        (QUOTA + "nodes:\n  - name: n\n    size: 1\n", 6, "nodes[0].size", "unknown field"),
        # both lists are checked before any entry: the units error wins over quota entry 0
        ("quotas:\n  - 7\nunits: 3\n", 3, "units", "must be a list"),
        # entries are checked one at a time: entry 0's bad field before entry 1's type
        ("quotas:\n  - name: q\n    parent: ''\n  - 7\n", 3, "quotas[0].parent", "non-empty"),
    ],
)
def test_list_and_entry_errors_name_line_and_field(
    text: str, line: int, field: str, reason: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text)
    assert (info.value.line, info.value.field) == (line, field)
    assert reason in info.value.reason
