"""bench/burst.py's component(): a bench that is killed takes its controller with it (an
orphaned `koordqueue run` once spun beside later benches against its dead API server)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_the_component_dies_with_a_killed_bench(tmp_path: Path) -> None:
    bench = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from bench.burst import component
        runner = [sys.executable, "-c", "import time; time.sleep(120)"]
        with component(["x"], {str(tmp_path / "c.log")!r}, startup_s=0.2, runner=runner) as pid:
            print(pid, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # no finally, no atexit: as `kill -9`
    """)
    done = subprocess.run([sys.executable, "-c", bench], capture_output=True, text=True,
                          timeout=60, check=False)
    child = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(child, 9)
    pytest.fail(f"component {child} outlived its killed bench")
