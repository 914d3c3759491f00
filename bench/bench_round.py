"""One admission round of the pure engine with a large backlog, per policy.

    python bench/bench_round.py [--units 1000,4000,16000] [--repeat 5]

Every unit waits: ten quotas of 10 CPUs are already full, and each unit asks 1 CPU. With
Priority each round offers every waiting unit to CheckUsage and rejects it: the cost a round
pays per waiting unit. Block and Intelligent (Koord-Queue's rules) stop at a quota's blocked
head, so their rounds try far fewer units. The controller runs a round on every change (at
most every 50 ms) and at least every admission period. Prints ms per round and µs per
waiting unit, with the ratio to the smallest backlog. No target yet: it measures a known
scaling limit (bench/README.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calibration import calibrate
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources

QUOTAS = 10


def backlog(policy: str, units: int) -> AdmissionEngine:
    engine = AdmissionEngine(oversell_rate="1")
    for q in range(QUOTAS):
        engine.upsert_quota(QuotaSpec(f"q{q}", max=Resources.of(cpu="10")))
        engine.upsert_queue(f"q{q}", policy, None)
    for i in range(units):
        engine.upsert_unit(
            QueueUnit(
                "ns",
                f"u{i}",
                uid=f"u{i}",
                resource=Resources.of(cpu="1"),
                priority=i % 7,
                labels={QUOTA_NAME_LABEL: f"q{i % QUOTAS}"},
                created=float(i),
                phase=Phase.ENQUEUED,
            )
        )
    engine.run_round(0.0)  # fills the quotas; everyone else waits from now on
    return engine


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
    for policy in ("Priority", "Intelligent", "Block"):
        base = None
        for units in sizes:
            engine = backlog(policy, units)
            best = float("inf")
            for r in range(args.repeat):
                started = time.process_time()
                engine.run_round(1.0 + r)
                best = min(best, time.process_time() - started)
            base = base or best
            print(
                f"{policy:11s} {units:6d} waiting: {best * 1000:7.1f} ms per round "
                f"({best / units * 1e6:.2f} µs per unit; {best / base:5.1f}x the smallest; "
                f"{cal.in_py_refs(best):.2f} py-ref)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
