"""A process that loses its lease exits at once, status 0, whatever its threads are blocked
in (run.py exit_after_losing_the_lease).

The soak (bench/soak.py, seed 1) found the old way, a graceful stop on SIGTERM with a hard
exit(1) 10 s later, waiting on requests still in flight after an etcd restart: the scheduler's
session thread in a relist (asyncio.run joins its executor's threads), the controller's
writers reading their answers (Writer.close joins them for up to 10 s). Stops took 6 to 10 s,
and one overran: exit status 1. This test stands in for such a process: a SIGTERM handler
whose clean-up joins a thread blocked for a minute. With the old function it exits 1 after
10 s (checked: fails on the status); now it exits 0 at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from koordqueue.cli.run import LEASE_LOST_EXIT

ROOT = Path(__file__).resolve().parents[3]
BLOCKED = """
import signal, sys, threading, time
from koordqueue.cli.run import exit_after_losing_the_lease

in_flight = threading.Thread(target=time.sleep, args=(60,))  # a request with no answer
in_flight.start()

def graceful_stop(*_):
    in_flight.join()  # what the clean-ups and asyncio.run's executor shutdown did
    sys.exit(0)

signal.signal(signal.SIGTERM, graceful_stop)
threading.Thread(target=exit_after_losing_the_lease, daemon=True).start()  # the leader thread
time.sleep(60)
"""


def test_a_lost_lease_exits_at_once_whatever_is_in_flight() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-2000:]
    assert took < 8, took  # (the interpreter's start and imports take about 2 s)
    assert LEASE_LOST_EXIT in done.stdout + done.stderr  # (structlog unconfigured: stdout)
