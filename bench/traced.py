"""`koordqueue ARGS` with a memory census on SIGUSR1 (bench/bench_memory.py runs it).

    python bench/traced.py OUT_PREFIX FRAMES run --kubeconfig=...

FRAMES > 0 starts tracemalloc with that many frames per traceback first (it slows the
process and adds its own memory: read the census, not the RSS, of such a run). On SIGUSR1
the process writes OUT_PREFIX.census.json (gc-tracked objects by type: count and shallow
bytes, VmRSS / VmHWM; the collector's frozen objects are unfrozen first, for good), with
FRAMES > 0 also OUT_PREFIX.snapshot (tracemalloc.Snapshot.dump), then OUT_PREFIX.done.
"""

from __future__ import annotations

import gc
import json
import runpy
import signal
import sys
import tracemalloc
from collections import Counter
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.burst import rss_mb  # noqa: E402


def census() -> dict[str, object]:
    """Every gc-tracked object by type name: how many, and their shallow sizes (bytes)."""
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for obj in gc.get_objects():
        name = type(obj).__name__
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj)
    top = sizes.most_common(25)
    return {"by_type": [(name, counts[name], size) for name, size in top]}


def main() -> None:
    prefix, frames, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if frames > 0:
        tracemalloc.start(frames)

    def dump(_signum: int, _frame: FrameType | None) -> None:
        before = rss_mb(0, "VmRSS")
        frozen = gc.get_freeze_count()
        gc.unfreeze()  # frozen objects (kube/gcfreeze.py) are not in gc.get_objects()
        unreachable = gc.collect()  # cyclic garbage, frozen or not, found by a full pass
        out = census()
        out["rss_before_collect_mb"] = before
        out["frozen_objects"] = frozen
        out["unreachable_collected"] = unreachable
        out["rss_mb"] = rss_mb(0, "VmRSS")
        out["hwm_mb"] = rss_mb(0, "VmHWM")
        Path(f"{prefix}.census.json").write_text(json.dumps(out))
        if frames > 0:
            tracemalloc.take_snapshot().dump(f"{prefix}.snapshot")
        Path(f"{prefix}.done").write_text("")

    signal.signal(signal.SIGUSR1, dump)
    sys.argv = ["koordqueue", *argv]
    runpy.run_module("koordqueue.cli.main", run_name="__main__")


if __name__ == "__main__":
    main()
