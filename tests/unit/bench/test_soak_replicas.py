"""bench/soak_replicas.py: how a replica's process ended is told apart (a fault's kill -9, a
lost Lease, anything else: what a crash looks like)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.soak_checker import Checker
from bench.soak_replicas import Replica, exit_cause


def test_exit_causes() -> None:
    assert exit_cause(-signal.SIGKILL, b"") == "killed"
    assert exit_cause(0, b"... leader election: lost the lease (not renewed) ...") == "lost lease"
    assert exit_cause(1, b"Traceback (most recent call last):") == "exit 1"


def test_each_process_of_a_slot_is_judged_by_its_own_log(tmp_path: Path) -> None:
    """The log is appended to by every process of the slot: a crash after a process that lost
    its Lease is still a crash (fails with the whole log read, checked)."""
    lost = [sys.executable, "-c", "print('leader election: lost the lease')"]
    replica = Replica("controller-0", "koord-queue", lost, tmp_path)
    checker = Checker()
    replica.start(checker)
    assert replica.proc is not None
    replica.proc.wait(30)
    replica.note_exit()
    replica.argv = [sys.executable, "-c", "raise SystemExit(3)"]
    replica.start(checker)
    replica.proc.wait(30)
    replica.note_exit()
    assert replica.exits == {"lost lease": 1, "exit 3": 1}
