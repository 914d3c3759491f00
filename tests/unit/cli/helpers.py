"""Run the CLI in-process and capture what it prints, as a user would see it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from koordqueue.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "docs" / "examples"
BAD_INPUTS = EXAMPLES / "bad-inputs"
GOLDEN = Path(__file__).resolve().parent / "golden"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> Run:
    """`koordqueue ARGV...` in-process; argparse's SystemExit becomes an exit code too."""
    args: Sequence[str] = [str(a) for a in argv]
    capsys.readouterr()
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)
