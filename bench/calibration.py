"""A machine yardstick measured in the same run as a benchmark.

These 2-core boxes differ by ~3x in single-thread speed and are shared, so an absolute figure
from one cannot be compared with one from another. Every benchmark therefore also runs two
fixed reference workloads and prints its headline as a multiple of them:

- `python`: a fixed pure-Python loop of the shapes our hot paths are made of (dict look-ups
  and updates keyed by short strings, tuple iteration, small function calls, integer
  compares). Its CPU time is the unit "py-ref"; a headline in py-refs is roughly
  machine-independent for interpreter-bound code (CheckUsage, rounds, the session framework).
- `numpy`: a fixed set of element-wise array operations on 1 M float64 values (the shape of
  vectorised node predicates and scores), reported as the unit "np-ref".

Each reference is the best of several repeats (a minimum is the stablest estimate of what the
machine can do; a median would also measure the neighbours). Run alone:
`python bench/calibration.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

_KEYS = tuple(f"res-{i}" for i in range(12))
_ROUNDS = 15_000
_ARRAY = 1_000_000
_ARRAY_OPS = 8


def _fits(limits: tuple[tuple[str, int], ...], used: dict[str, int], req: dict[str, int]) -> bool:
    for key, limit in limits:  # noqa: SIM110 - the explicit loop is the hot-path shape measured
        if limit - used.get(key, 0) < req.get(key, 0):
            return False
    return True


def python_workload() -> int:
    """The fixed interpreter workload (deterministic; returns a checksum so nothing is elided)."""
    limits = tuple((k, 1_000 + 37 * i) for i, k in enumerate(_KEYS))
    used: dict[str, int] = {}
    admitted = 0
    for n in range(_ROUNDS):
        req = {_KEYS[(n + j) % 12]: (n * 7 + j) % 50 for j in range(4)}
        if _fits(limits, used, req):
            admitted += 1
            for key, amount in req.items():
                used[key] = used.get(key, 0) + amount
        else:
            used.clear()
    return admitted + sum(used.values())


def numpy_workload() -> float:
    """The fixed array workload: element-wise arithmetic, compares and reductions."""
    rng = np.random.default_rng(7)
    idle = rng.random(_ARRAY)
    request = rng.random(_ARRAY) * 0.5
    total = 0.0
    for _ in range(_ARRAY_OPS):
        fits = idle >= request
        score = np.where(fits, (idle - request) / (idle + 1.0), -1.0)
        total += float(score.max()) + float(fits.sum())
    return total


def best_cpu_seconds(fn: Callable[[], object], repeats: int = 5) -> float:
    """Least CPU time over `repeats` runs of `fn`: the run the box disturbed least."""
    best = float("inf")
    for _ in range(repeats):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return max(best, 1e-9)


@dataclass(frozen=True)
class Calibration:
    """CPU seconds of one run of each reference workload on this machine, now."""

    python_s: float
    numpy_s: float

    def line(self) -> str:
        return (
            f"calibration: py-ref {self.python_s * 1000:.1f} ms CPU, "
            f"np-ref {self.numpy_s * 1000:.1f} ms CPU (best of repeats, this run)"
        )

    def in_py_refs(self, cpu_s: float) -> float:
        """A CPU time as a multiple of the pure-Python reference."""
        return cpu_s / self.python_s

    def in_np_refs(self, cpu_s: float) -> float:
        """A CPU time as a multiple of the numpy reference."""
        return cpu_s / self.numpy_s

    def as_dict(self) -> dict[str, float]:
        return {
            "py_ref_ms": round(self.python_s * 1000, 2),
            "np_ref_ms": round(self.numpy_s * 1000, 2),
        }


def calibrate(repeats: int = 7) -> Calibration:
    """Measure both references (about 0.5 s of CPU on the slow box)."""
    python_workload()  # warm caches and the allocator before timing
    return Calibration(
        python_s=best_cpu_seconds(python_workload, repeats),
        numpy_s=best_cpu_seconds(numpy_workload, max(3, repeats // 2)),
    )


if __name__ == "__main__":
    print(calibrate().line())
