"""The machine yardstick the benchmarks report against must be fixed work, and its units exact."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.calibration import Calibration, calibrate, numpy_workload, python_workload


def test_reference_workloads_are_deterministic() -> None:
    # Fixed work: the same checksum every time, so a py-ref is the same job on every box.
    assert python_workload() == python_workload()
    assert numpy_workload() == numpy_workload()


def test_headlines_convert_to_reference_multiples() -> None:
    cal = Calibration(python_s=0.02, numpy_s=0.05)
    assert cal.in_py_refs(0.5) == 25.0
    assert cal.in_np_refs(0.5) == 10.0
    assert cal.as_dict() == {"py_ref_ms": 20.0, "np_ref_ms": 50.0}
    assert "py-ref 20.0 ms" in cal.line()


def test_calibrate_measures_positive_times() -> None:
    cal = calibrate(repeats=1)
    assert cal.python_s > 0
    assert cal.numpy_s > 0
