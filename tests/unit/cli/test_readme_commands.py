"""README's commands are what CI runs, and they install what the tests need (issue 33 part 10).

Before: README command 2 installed `.[test]` while matplotlib was only in the `plot` extra, so
the three `simulate --plot` tests were skipped on a fresh machine following the README.
"""

from __future__ import annotations

import re
import tomllib

from tests.unit.cli.helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _test_command() -> str:
    commands = [line for line in README.splitlines() if "-m pytest" in line]
    assert len(commands) == 1, commands
    return commands[0].strip()


def _requirement_names(extras: list[str]) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*project["dependencies"]]
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    return {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower() for req in wanted}


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    assert _test_command() in CI.splitlines()


def test_the_readme_test_command_installs_every_package_a_test_may_skip_without() -> None:
    extras_match = re.search(r"-e '\.\[([a-z,]+)\]'", _test_command())
    assert extras_match, _test_command()
    installed = _requirement_names(extras_match.group(1).split(","))
    skipped_without = {
        name.lower()
        for path in (ROOT / "tests").rglob("*.py")
        for name in re.findall(r"importorskip\(\s*[\"']([\w.]+)[\"']", path.read_text("utf-8"))
    }
    assert skipped_without, "no importorskip left: this test has nothing to check"
    assert skipped_without <= installed, skipped_without - installed
