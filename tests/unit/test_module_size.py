"""No module in koordqueue/ over 600 lines without its docstring saying why (issue 25, part 4).

Fails at 5119b54 (checked): kube/api.py (800), kube/controller/workloads.py (624),
kube/scheduler/snapshot.py (617), cli/explain.py (613) and framework/session_plugins.py (604)
were past it with no reason given.
"""

from __future__ import annotations

import ast
from pathlib import Path

import koordqueue

LIMIT = 600
REASON = "600 lines on purpose"
"""What a longer module's docstring says, followed by why (quota_tree.py, session_plugins.py)."""


def test_a_module_past_the_limit_says_why() -> None:
    root = Path(koordqueue.__file__).parent
    unexplained = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > LIMIT and REASON not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(f"{path.relative_to(root)}: {lines}")
    assert unexplained == []
