"""CPU per quantity parse and per resource-list parse (issue 11 follow-up: every Job and
unit watch event parses its requests; the strings repeat: "100m", "1Gi", "2").

Reports the best of several repeats in CPU time (time.process_time) and as a multiple of
the calibration yardstick (bench/calibration.py). Run: `python bench/bench_quantity.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calibration import best_cpu_seconds, calibrate
from koordqueue.domain.quantity import parse_quantity
from koordqueue.domain.resources import Resources

_STRINGS = ("100m", "1Gi", "2", "500Mi", "250m", "4", "1500m", "8Gi")
_LIST = {"cpu": "100m", "memory": "1Gi", "nvidia.com/gpu": "1"}
_LOOPS = 20_000


def _strings() -> None:
    for _ in range(_LOOPS):
        for text in _STRINGS:
            parse_quantity(text, "spec.resource.cpu")


def _lists() -> None:
    for _ in range(_LOOPS):
        Resources.parse(_LIST, "spec.resource")


def main() -> None:
    cal = calibrate()
    per_string = best_cpu_seconds(_strings) / (_LOOPS * len(_STRINGS))
    per_list = best_cpu_seconds(_lists) / _LOOPS
    print(cal.line())
    print(f"parse_quantity: {per_string * 1e6:.3f} us CPU per string "
          f"({cal.in_py_refs(per_string) * 1e6:.1f} micro-py-ref)")
    print(f"Resources.parse (3 quantities): {per_list * 1e6:.3f} us CPU per list "
          f"({cal.in_py_refs(per_list) * 1e6:.1f} micro-py-ref)")


if __name__ == "__main__":
    main()
