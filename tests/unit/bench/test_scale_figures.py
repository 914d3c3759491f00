"""bench/scale_figures.py: quota held read from one watch per object (issue 28, part 2)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import scale_figures as su
from koordqueue.domain.queue_unit import ADMITTED_PHASES


def test_unit_holds_are_the_controllers_admitted_phases() -> None:
    assert frozenset(p.value for p in ADMITTED_PHASES) == su.UNIT_HOLDS


def test_held_stretches_follow_the_states_and_an_open_one_runs_to_the_end() -> None:
    steps = [(0.0, ""), (1.0, "Enqueued"), (2.0, "Dequeued"), (2.5, "Running"),
             (4.0, "Succeed"), (5.0, "Dequeued"), (6.0, "Succeed"), (7.0, "Dequeued")]  # fmt: skip
    # a finished unit admitted again (found by bench_scale at 193f492) holds quota again
    assert su.held_stretches(steps, su.UNIT_HOLDS, 9.0) == [(2.0, 4.0), (5.0, 6.0), (7.0, 9.0)]
    assert su.held_stretches([(1.0, "Enqueued")], su.UNIT_HOLDS, 9.0) == []


def test_record_keeps_changes_only() -> None:
    history: dict[str, list[tuple[float, str]]] = {}
    for at, state in ((1.0, "Enqueued"), (1.5, "Enqueued"), (2.0, "Dequeued")):
        su.record(history, "ns/a", at, state)
    assert history == {"ns/a": [(1.0, "Enqueued"), (2.0, "Dequeued")]}


def test_workload_state_from_its_conditions() -> None:
    def wl(*conditions: tuple[str, str]) -> dict[str, object]:
        return {"status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}

    assert su.workload_state({}) == su.WORKLOAD_PENDING
    assert su.workload_state(wl(("QuotaReserved", "False"))) == su.WORKLOAD_PENDING
    assert su.workload_state(wl(("QuotaReserved", "True"), ("Admitted", "True"))) == (
        su.WORKLOAD_RESERVED
    )
    # Kueue keeps QuotaReserved on a finished Workload; its quota is released all the same
    assert su.workload_state(wl(("QuotaReserved", "True"), ("Finished", "True"))) == (
        su.WORKLOAD_FINISHED
    )
    evicted = wl(("QuotaReserved", "False"), ("Evicted", "True"))
    assert su.workload_state(evicted) == su.WORKLOAD_PENDING


def test_held_intervals_skip_objects_of_other_runs() -> None:
    history = {"ns/a": [(1.0, "Dequeued"), (2.0, "Succeed")], "ns/x": [(1.0, "Dequeued")]}
    cpu = {"ns/a": 5.0}
    assert su.held_intervals(history, su.UNIT_HOLDS, cpu.get, 3.0) == [(1.0, 2.0, 5.0, "ns/a")]


def test_peak_by_group_counts_a_release_before_an_admission_at_the_same_instant() -> None:
    intervals = [(0.0, 1.0, 20.0, "c0"), (1.0, 2.0, 20.0, "c0"), (0.5, 1.5, 5.0, "c1"),
                 (0.7, 0.9, 5.0, "c1"), (3.0, 3.0, 99.0, "c2")]  # fmt: skip
    assert su.peak_by_group(intervals) == {"c0": 20.0, "c1": 10.0}


def test_held_after_release_names_objects_that_held_again_after_their_release() -> None:
    history = {
        "ns/unit": [(1.0, "Dequeued"), (2.0, "Succeed"), (3.0, "Dequeued"), (4.0, "Succeed")],
        "ns/ok": [(1.0, "Enqueued"), (2.0, "Dequeued"), (3.0, "Succeed")],
        "ns/requeued": [(1.0, "Dequeued"), (2.0, "Enqueued"), (3.0, "Dequeued")],
    }
    assert su.held_after_release(history, su.UNIT_HOLDS, su.UNIT_RELEASED) == ["ns/unit"]
    # Kueue re-reserving a Finished Workload (seen at --scale 0.1, 2026-12-05: 32 of 1,500)
    workloads = {"ns/w": [(1.0, "QuotaReserved"), (2.0, "Finished"), (3.0, "QuotaReserved")]}
    assert su.held_after_release(workloads, su.WORKLOAD_HOLDS, su.WORKLOAD_RELEASED) == ["ns/w"]
