"""bench/soak_replicas.py: how a replica's process ended is told apart (the fault schedule's
kill -9, a lost Lease, the soak's own stop at its end) and anything else is a crash, which
bench/soak.py reports as the `replica-crashed` violation."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.soak_checker import Checker
from bench.soak_replicas import KILLED, LOST, STOPPED, Replica, exit_cause, is_crash

LOST_LOG = b"... leader election: lost the lease (not renewed) ..."


def test_expected_exits() -> None:
    assert exit_cause(-signal.SIGKILL, b"", killed=True) == KILLED
    assert exit_cause(0, LOST_LOG) == LOST
    assert exit_cause(0, b"", terminated=True) == STOPPED


def test_every_other_exit_is_a_crash() -> None:
    """A SIGKILL the schedule did not send (the OOM killer's), a traceback, a lost Lease whose
    graceful stop hung (run.py's old os._exit(1) 10 s later), a non-zero status on our SIGTERM,
    and a status-0 exit nobody asked for (a thread that ended the process quietly)."""
    cases = {
        "crash (signal 9)": exit_cause(-signal.SIGKILL, b""),
        "crash (status 1)": exit_cause(1, b"Traceback (most recent call last):"),
        "crash (status 1, after a lost lease)": exit_cause(1, LOST_LOG),
        "crash (signal 15, after our SIGTERM)": exit_cause(-signal.SIGTERM, b"",
                                                           terminated=True),
        "crash (status 0)": exit_cause(0, b"shutting down"),
    }
    for expected, cause in cases.items():
        assert cause == expected
        assert is_crash(cause)
    assert not any(is_crash(c) for c in (KILLED, LOST, STOPPED))


def test_each_process_of_a_slot_is_judged_by_its_own_log(tmp_path: Path) -> None:
    """The log is appended to by every process of the slot: a crash after a process that lost
    its Lease is still a crash (fails with the whole log read, checked)."""
    lost = [sys.executable, "-c", "print('leader election: lost the lease')"]
    replica = Replica("controller-0", "koord-queue", lost, tmp_path)
    checker = Checker()
    replica.start(checker)
    assert replica.proc is not None
    replica.proc.wait(30)
    assert replica.note_exit() is not None
    assert replica.note_exit() is None  # once per process
    replica.argv = [sys.executable, "-c", "print('boom'); raise SystemExit(3)"]
    replica.start(checker)
    replica.proc.wait(30)
    crashed = replica.note_exit()
    assert crashed is not None and crashed.cause == "crash (status 3)"
    assert "boom" in crashed.log_tail
    assert replica.exits == {LOST: 1, "crash (status 3)": 1}


def test_the_schedules_kill_and_the_final_stop_are_told_apart(tmp_path: Path) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    replica = Replica("scheduler-0", "koord-queue-scheduler", sleeper, tmp_path)
    checker = Checker()
    replica.start(checker)
    pid = replica.kill()
    assert replica.proc is not None
    replica.proc.wait(30)
    life = replica.note_exit()
    assert life is not None and (life.pid, life.cause) == (pid, KILLED)
    replica.argv = [sys.executable, "-c",
                    "import signal, sys, time\n"
                    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
                    "print('up', flush=True)\n"
                    "time.sleep(60)"]
    replica.start(checker)
    deadline = time.monotonic() + 30
    while not replica.log.read_bytes().endswith(b"up\n") and time.monotonic() < deadline:
        time.sleep(0.05)  # (its SIGTERM handler is set)
    took, life = replica.terminate()
    assert life is not None and life.cause == STOPPED and took < 30
    assert [lv.cause for lv in replica.lives] == [KILLED, STOPPED]
