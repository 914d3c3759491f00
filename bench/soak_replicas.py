"""The soak's replicas (bench/soak.py): `koordqueue run` / `schedule` processes, each slot
restarted a second after its process exits, as a Deployment would; what each process's RSS
did and how each one ended.

How each process ended is classified (`exit_cause`): killed by the fault schedule (a
SIGKILL the schedule sent to that pid), lost its Lease (its log says so and it then exited
with status 0: client-go's components exit then, and so do ours, run.py
exit_after_losing_the_lease), stopped by the soak at its end (SIGTERM, status 0), or anything
else: a crash, which bench/soak.py reports as the `replica-crashed` violation. A lost Lease
followed by a non-zero status is a crash too (run.py used to stop gracefully with a 10 s
`os._exit(1)` deadline, which a stop waiting on requests in flight overran).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.soak_checker import Checker
from bench.soak_churn import INTEGRATIONS, SCHEDULER

ROOT: Final = Path(__file__).resolve().parents[1]
LOST_LEASE: Final = b"lost the lease"
"""What leader.py logs before the process exits on a lost Lease."""
KILLED: Final = "killed by the schedule"
LOST: Final = "lost lease"
STOPPED: Final = "stopped at the end"
CRASH: Final = "crash"
"""The prefix of every other cause (`is_crash`)."""
LOG_TAIL: Final = 6000
"""Bytes of a crashed process's log kept for the violation's detail."""


def identity_of(pid: int) -> str:
    """The leader-election identity of a replica process (leader.py: host_pid)."""
    return f"{socket.gethostname()}_{pid}"


def exit_cause(returncode: int, log_tail: bytes, *, killed: bool = False,
               terminated: bool = False) -> str:
    """How a replica's process ended. `killed`: the fault schedule SIGKILLed this pid;
    `terminated`: the soak SIGTERMed it at the end. Expected: a SIGKILL we sent, a lost Lease
    then status 0, status 0 after our SIGTERM; anything else is 'crash (...)'."""
    if killed and returncode == -signal.SIGKILL:
        return KILLED
    if terminated and returncode == 0:
        return STOPPED
    lost = LOST_LEASE in log_tail
    if lost and returncode == 0:
        return LOST
    how = f"signal {-returncode}" if returncode < 0 else f"status {returncode}"
    return f"{CRASH} ({how}{', after a lost lease' if lost else ''}" \
           f"{', after our SIGTERM' if terminated else ''})"


def is_crash(cause: str) -> bool:
    return cause.startswith(CRASH)


@dataclass
class Life:
    """One process of a slot: when it ran and how it ended."""

    pid: int
    started: float
    ended: float | None = None
    status: int | None = None
    cause: str = ""
    log_tail: str = ""


class Replica:
    """One `koordqueue run` or `koordqueue schedule` process slot, restarted when it exits."""

    def __init__(self, name: str, lease: str, argv: list[str], workdir: Path) -> None:
        self.name, self.lease, self.argv = name, lease, argv
        self.log = workdir / f"{name}.log"
        self.clock_file = workdir / f"clock-{name}"
        self.clock_file.write_text("0")
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False  # SIGSTOPped by a fault (not restarted meanwhile)
        self.starts = 0
        self.rss: dict[int, list[tuple[float, int]]] = {}
        """pid -> (seconds, bytes) samples."""
        self.born: dict[int, float] = {}
        self.exits: Counter[str] = Counter()
        """exit_cause -> how many of this slot's processes ended so."""
        self.lives: list[Life] = []
        self.killed: set[int] = set()
        """pids the fault schedule SIGKILLed (`kill`)."""
        self._log_from = 0

    @property
    def identity(self) -> str:
        assert self.proc is not None
        return identity_of(self.proc.pid)

    def start(self, checker: Checker) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "bench" / "soak_clock")]),
               "KOORDQUEUE_SOAK_CLOCK_FILE": str(self.clock_file)}
        with open(self.log, "ab") as log:
            self._log_from = log.tell()
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                         env=env)
        checker.register(self.identity, self.lease)
        self.born[self.proc.pid] = time.time()
        self.lives.append(Life(self.proc.pid, time.time()))
        self.starts += 1

    def kill(self) -> int:
        """The fault schedule's kill -9; returns the pid."""
        assert self.proc is not None
        self.killed.add(self.proc.pid)
        self.proc.kill()
        return self.proc.pid

    def note_exit(self, terminated: bool = False) -> Life | None:
        """Its process has ended: note how (before it is restarted); the Life, once."""
        if self.proc is None or self.proc.returncode is None or not self.lives:
            return None
        life = self.lives[-1]
        if life.pid != self.proc.pid or life.ended is not None:
            return None
        tail = b""
        with contextlib.suppress(OSError), open(self.log, "rb") as log:
            log.seek(self._log_from)
            tail = log.read()
        life.ended, life.status = time.time(), self.proc.returncode
        life.cause = exit_cause(self.proc.returncode, tail,
                                killed=self.proc.pid in self.killed, terminated=terminated)
        if is_crash(life.cause):
            life.log_tail = tail[-LOG_TAIL:].decode(errors="replace")
        self.exits[life.cause] += 1
        return life

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sample_rss(self, now: float) -> None:
        if not self.alive() or self.stopped:
            return
        assert self.proc is not None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    kb = int(line.split()[1])
                    self.rss.setdefault(self.proc.pid, []).append((now, kb * 1024))

    def terminate(self) -> tuple[float, Life | None]:
        """SIGTERM at the end of the run: seconds it took to exit, and its Life (its exit
        classified: status 0 is a clean stop; a hang past 30 s is SIGKILLed, a crash)."""
        if self.proc is None:
            return 0.0, None
        if self.proc.poll() is not None:
            return 0.0, self.note_exit()  # (ended since the supervisor last looked)
        if self.stopped:
            self.proc.send_signal(signal.SIGCONT)
        t0 = time.monotonic()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        return time.monotonic() - t0, self.note_exit(terminated=True)


def replica_argv(command: str, kubeconfig: Path, args: argparse.Namespace) -> list[str]:
    common = [sys.executable, "-m", "koordqueue.cli.main", command,
              f"--kubeconfig={kubeconfig}", "--leader-elect=true",
              f"--leader-elect-lease-duration={args.lease}",
              f"--leader-elect-renew-deadline={args.lease * 0.75:g}",
              "--leader-elect-retry-period=0.5", "--metrics-port=0", "--health-port=0",
              "--log-format=console", "--log-level=info"]
    if command == "run":
        return [*common, "--admission-period=0.5", "--scheduler-name=soak-unused",
                f"--integrations={INTEGRATIONS}"]
    return [*common, f"--scheduler-name={SCHEDULER}"]


