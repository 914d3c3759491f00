"""One admission round of the pure engine with a large backlog, per policy.

    python bench/bench_round.py [--units 1000,4000,16000] [--repeat 5]

Every unit waits: ten quotas of 10 CPUs are already full, and each unit asks 1 CPU. Three
rounds are measured for each policy and backlog:

- `full`: the full scan (`AdmissionEngine(skip_unchanged=False)`, the engine before issue 11
  part 4): with Priority every waiting unit is offered to CheckUsage and rejected again;
  Block and Intelligent stop at a quota's blocked head but still walk and record every unit;
- `idle`: the incremental engine (the default) when nothing changed since the last round;
- `release`: the incremental engine in the round right after one admitted unit of one quota
  finished (its quota has room for one unit again); `after`: the round after that one (the
  admitted unit has left its queue; Block/Intelligent re-blocked their quota); and
  `release/full` the release round on the full scan. Each repeat releases another unit; the
  release round admits one and parks the rest.

CPU time (process_time), best of `--repeat`, in ms per round, with the ratio to the smallest
backlog and py-refs (the machine yardstick, bench/README.md). Target (issue 11 part 4): the
release round with 16,000 waiting units < 1 ms.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calibration import calibrate
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources

QUOTAS = 10
POLICIES = ("Priority", "Intelligent", "Block", "Intelligent/low")
"""`Intelligent/low`: an Intelligent queue whose units are all below its priority threshold
(each round is one pass over them all, none blocks); the others: priorities 0-6."""


def backlog(policy: str, units: int, *, skip_unchanged: bool = True) -> AdmissionEngine:
    engine = AdmissionEngine(oversell_rate="1", skip_unchanged=skip_unchanged)
    low = policy.endswith("/low")
    for q in range(QUOTAS):
        engine.upsert_quota(QuotaSpec(f"q{q}", max=Resources.of(cpu="10")))
        engine.upsert_queue(f"q{q}", policy.removesuffix("/low"), None)
    for i in range(units):
        engine.upsert_unit(
            QueueUnit(
                "ns",
                f"u{i}",
                uid=f"u{i}",
                resource=Resources.of(cpu="1"),
                priority=0 if low else i % 7,
                labels={QUOTA_NAME_LABEL: f"q{i % QUOTAS}"},
                created=float(i),
                phase=Phase.ENQUEUED,
            )
        )
    engine.run_round(0.0)  # fills the quotas; everyone else waits from now on
    engine.run_round(0.5)  # (Block/Intelligent: the blocked heads' first quiet round)
    return engine


def idle_round(engine: AdmissionEngine, repeat: int, t0: float) -> float:
    best = float("inf")
    for r in range(repeat):
        started = time.process_time()
        engine.run_round(t0 + r)
        best = min(best, time.process_time() - started)
    return best


def release_round(engine: AdmissionEngine, repeat: int, t0: float) -> tuple[float, float]:
    """Finish one admitted unit of quota q3, then time the round that refills q3 and the
    round after it; best of `repeat` for each."""
    best = after = float("inf")
    for r in range(repeat):
        victim = next(
            u for u in engine.units()
            if engine.is_admitted(u.uid) and u.labels[QUOTA_NAME_LABEL] == "q3"
        )
        engine.upsert_unit(replace(victim, phase=Phase.SUCCEED))
        started = time.process_time()
        record = engine.run_round(t0 + r)
        best = min(best, time.process_time() - started)
        assert len(record.admitted) == 1, "the release round must admit exactly one unit"
        del record
        started = time.process_time()
        engine.run_round(t0 + r + 0.5)
        after = min(after, time.process_time() - started)
    return best, after


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--units", default="1000,4000,16000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(n) for n in args.units.split(",")]
    cal = calibrate()
    print(cal.line())
    columns = ("full", "idle", "release", "after", "release/full")
    print(f"{'policy':15s} {'waiting':>7s}  " + "  ".join(f"{c:>16s}" for c in columns)
          + "   (ms per round, CPU; x: vs the smallest backlog)")
    for policy in POLICIES:
        base: dict[str, float] = {}
        for units in sizes:
            full = backlog(policy, units, skip_unchanged=False)
            fast = backlog(policy, units)
            times = {"full": idle_round(full, args.repeat, 1.0),
                     "idle": idle_round(fast, args.repeat, 1.0)}
            times["release"], times["after"] = release_round(fast, args.repeat, 100.0)
            times["release/full"], _ = release_round(full, args.repeat, 100.0)
            for k, v in times.items():
                base.setdefault(k, v)
            cells = "  ".join(
                f"{v * 1000:8.2f} ({v / base[k]:5.1f}x)" for k, v in times.items()
            )
            release_refs = cal.in_py_refs(times["release"])
            print(f"{policy:15s} {units:7d}  {cells}   release {release_refs:.4f} py-ref")
    return 0


if __name__ == "__main__":
    sys.exit(main())
