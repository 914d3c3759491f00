"""The soak's replicas (bench/soak.py): `koordqueue run` / `schedule` processes, each slot
restarted a second after its process exits, as a Deployment would; what each process's RSS
did and how each one ended.

How a process ended is noted for the summary: its exit status, and whether its log says it
lost its Lease first (client-go's components exit then, and so do ours: run.py SIGTERMs
itself). An exit with neither a fault that killed it nor a lost Lease before it is what a
crash looks like; it is counted, not yet judged (the statuses the faults leave have not been
measured over a whole run).
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
from pathlib import Path
from typing import Final

from bench.soak_checker import Checker
from bench.soak_churn import INTEGRATIONS, SCHEDULER

ROOT: Final = Path(__file__).resolve().parents[1]
LOST_LEASE: Final = b"lost the lease"
"""What leader.py logs before the process exits on a lost Lease."""


def exit_cause(returncode: int, log_tail: bytes) -> str:
    """How a replica's process ended: 'killed' (SIGKILL: a fault's kill -9), 'lost lease'
    (its log says so), else 'exit <status>' (a crash, or a stop not yet accounted for)."""
    if returncode == -signal.SIGKILL:
        return "killed"
    if LOST_LEASE in log_tail:
        return "lost lease"
    return f"exit {returncode}"


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
        """exit_cause -> how many of this slot's processes ended so (restarted after)."""
        self._log_from = 0

    @property
    def identity(self) -> str:
        assert self.proc is not None
        return f"{socket.gethostname()}_{self.proc.pid}"

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
        self.starts += 1

    def note_exit(self) -> None:
        """Its process has ended: note how (before it is restarted)."""
        if self.proc is None or self.proc.returncode is None:
            return
        with contextlib.suppress(OSError), open(self.log, "rb") as log:
            log.seek(self._log_from)
            self.exits[exit_cause(self.proc.returncode, log.read())] += 1

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

    def terminate(self) -> float:
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        if self.stopped:
            self.proc.send_signal(signal.SIGCONT)
        t0 = time.monotonic()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        return time.monotonic() - t0


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


