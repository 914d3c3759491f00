"""What the visibility API costs per admission round when a client reads every pending unit.

The pure engine holds `--held` units that never fit (a quota of max 0) beside one busy queue
where each round admits one unit, one leaves and one more waits; after each round the view
takes the round's snapshot and answers a query for every pending unit (one PendingView across
rounds, as the controller runs it). Prints CPU ms per round (the engine's round not counted)
and the curve over `--held`; with `--against DIR` the same rounds run on the tree at DIR too
(e.g. a `git archive` of an older commit; it needs the same PendingView, Publication and
Query), in its own process, and the ratio this tree / that one.

    python bench/bench_pending_read.py [--held 1000,4000,15000] [--rounds 200] [--against DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if "--root" in sys.argv:  # (the run for --against: that tree's package, this bench)
    sys.path.insert(0, sys.argv[sys.argv.index("--root") + 1])
sys.path.insert(1, str(ROOT))

from bench.calibration import calibrate  # noqa: E402
from koordqueue.domain.engine import AdmissionEngine  # noqa: E402
from koordqueue.domain.names import QUOTA_NAME_LABEL  # noqa: E402
from koordqueue.domain.queue_unit import QueueUnit  # noqa: E402
from koordqueue.domain.quota import QuotaSpec  # noqa: E402
from koordqueue.domain.resources import Resources  # noqa: E402
from koordqueue.kube.visibility.view import PendingView, Publication, Query  # noqa: E402


def unit(name: str, quota: str, created: float) -> QueueUnit:
    return QueueUnit("bench", name, uid=name, resource=Resources.of(cpu="1"),
                     labels={QUOTA_NAME_LABEL: quota}, created=created)


def engine_with(held: int) -> AdmissionEngine:
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("held", max=Resources.of(cpu="0")))
    engine.upsert_quota(QuotaSpec("busy", max=Resources.of(cpu="2")))
    engine.upsert_queue("held", "Priority")
    engine.upsert_queue("busy", "Priority")
    for i in range(held):
        engine.upsert_unit(unit(f"h{i}", "held", float(i)))
    return engine


def churn(engine: AdmissionEngine, k: int) -> None:
    """Two arrive in the busy queue, the one admitted two rounds ago leaves."""
    for j in (2 * k, 2 * k + 1):
        engine.upsert_unit(unit(f"b{j}", "busy", 1e6 + j))
    if k:
        engine.remove_unit(f"b{2 * k - 2}")


def measure(held: int, rounds: int) -> dict[str, float]:
    """CPU ms per round of the view's snapshot and full answer (the engine's not counted)."""
    engine = engine_with(held)
    publication = Publication()
    view = PendingView(publication)
    spent = 0.0
    query = Query(limit=held + 2 * rounds)
    answer_bytes = 0
    for k in range(rounds + 1):
        churn(engine, k)
        publication.publish(engine.run_round(float(k)), float(k))
        c0 = time.process_time()
        snap = view.snapshot()
        assert snap is not None
        answer = view.pending(snap, query)
        if k:  # the first round fills the view's caches
            spent += time.process_time() - c0
        answer_bytes = len(answer)
    return {"held": held, "ms": 1000 * spent / rounds, "answer_mb": answer_bytes / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", default="1000,4000,15000")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--against", default="", help="another tree to run the same rounds on")
    parser.add_argument("--root", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(h) for h in args.held.split(",")]
    if args.root:
        print(json.dumps([measure(h, args.rounds) for h in sizes]))
        return
    cal = calibrate()
    print(cal.line())
    rows = [measure(h, args.rounds) for h in sizes]
    other: list[dict[str, float]] = []
    if args.against:
        run = subprocess.run(
            [sys.executable, __file__, "--held", args.held, "--rounds", str(args.rounds),
             "--root", str(Path(args.against).resolve())],
            check=True, capture_output=True, text=True,
        )
        other = json.loads(run.stdout.strip().splitlines()[-1])
    print("| held units | answer MB | ms / round | py-refs / round"
          + (" | ms / round, --against | this / that |" if other else " |"))
    print("|---|---|---|---" + ("|---|---|" if other else "|"))
    for i, r in enumerate(rows):
        line = (f"| {r['held']} | {r['answer_mb']:.2f} | {r['ms']:.2f} | "
                f"{cal.in_py_refs(r['ms'] / 1000):.3f} |")
        if other:
            line += f" {other[i]['ms']:.2f} | {r['ms'] / other[i]['ms']:.2f}x |"
        print(line)
    print(json.dumps({"rows": rows, "against": other, "calibration": cal.as_dict()}))


if __name__ == "__main__":
    main()
