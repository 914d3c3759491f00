"""A graceful stop that hangs after a lost lease ends the process with every thread's stack
(run.py's stop_hung): the soak (bench/soak.py, --ci seed 1) saw a scheduler exit by the 10 s
deadline with nothing in its log to say where it had hung."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from koordqueue.cli.run import STOP_HUNG

ROOT = Path(__file__).resolve().parents[3]
HANGS = """
import threading, time
from koordqueue.cli.run import stop_hung

def stuck_in_a_request() -> None:
    time.sleep(60)

threading.Thread(target=stuck_in_a_request, daemon=True).start()
time.sleep(0.2)
stop_hung()
"""


def test_a_hung_stop_exits_with_every_threads_stack() -> None:
    """Without the dump (os._exit(1) alone, as before) stderr names no thread: fails."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", HANGS], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 1
    assert STOP_HUNG in done.stdout + done.stderr  # (structlog unconfigured: stdout)
    assert "in stuck_in_a_request" in done.stderr
