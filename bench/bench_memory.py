"""Where koordqueue's memory goes with many pending units (issue 36 point 2, RSS).

    python bench/bench_memory.py [--depth 10000] [--quotas 10] [--frames 0|N] [--top 30]

A fresh control plane, bench_curve's three-level hierarchy with every leaf at 0, `--depth`
suspended Jobs held until each has its QueueUnit Enqueued and the controller is quiet
(bench/release.py `hold`), as bench_curve's depth run holds them. Then the controller
(run through bench/traced.py) writes a census: gc-tracked objects by type, VmRSS and VmHWM;
one QueueUnit and one Job as the API server lists them go to LOG_DIR/memory-*.objects.json;
with `--frames N` (tracemalloc, N frames per traceback: slower, and its own bookkeeping
inflates the RSS) also the top allocations by line and by traceback. Prints them and one
JSON line starting `{"memory"`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import curve  # noqa: E402
from bench.burst import component, rss_mb  # noqa: E402
from bench.release import hold, unit_pending  # noqa: E402
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE_UNIT, KubeApi, load_api_client  # noqa: E402


def top_allocations(path: str, top: int) -> dict[str, list[str]]:
    """The snapshot's largest allocation sites, by line and by whole traceback."""
    snapshot = tracemalloc.Snapshot.load(path).filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    total = sum(s.size for s in snapshot.statistics("filename"))
    out: dict[str, list[str]] = {"total": [f"{total / 1e6:.1f} MB traced"]}
    out["by_line"] = [
        f"{s.size / 1e6:8.1f} MB {s.count:9d} {s.traceback[0].filename}:{s.traceback[0].lineno}"
        for s in snapshot.statistics("lineno")[:top]
    ]
    out["by_traceback"] = []
    for s in snapshot.statistics("traceback")[: top // 2]:
        frames = " <- ".join(
            f"{Path(f.filename).name}:{f.lineno}" for f in reversed(s.traceback[-8:])
        )
        out["by_traceback"].append(f"{s.size / 1e6:8.1f} MB {s.count:9d} {frames}")
    return out


def main() -> int:
    from tests.controlplane.harness import ControlPlane
    from tests.e2e import kq
    from tests.e2e.conftest import Kubectl, install_crds

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depth", type=int, default=10000)
    parser.add_argument("--quotas", type=int, default=10)
    parser.add_argument("--frames", type=int, default=0, help="tracemalloc frames (0: off)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--run-flags", default="", help="extra `koordqueue run` flags")
    parser.add_argument("--log-dir", default="/tmp")
    args = parser.parse_args()
    tree = curve.hierarchy(args.quotas)
    prefix = f"{args.log_dir}/memory-{args.depth}-{os.getpid()}"
    log = f"{prefix}.log"
    with ControlPlane() as cp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        install_crds(kubectl)
        system_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koord-queue"}}
        kubectl.apply(system_ns)
        ns = kq.namespace(kubectl, "bench")
        with ThreadPoolExecutor(args.clients) as pool:
            for level in curve.elastic_quotas(tree, args.depth):
                list(pool.map(lambda q: api.create(ELASTIC_QUOTA, q, curve.QUOTA_NAMESPACE), level))
        bodies = [
            kq.job(f"job{i:05d}", ns, tree.leaves[i % args.quotas]) for i in range(args.depth)
        ]
        argv = [
            "run", f"--kubeconfig={cp.kubeconfig}", "--metrics-port=0", "--health-port=0",
            "--log-level=info", *shlex.split(args.run_flags),
        ]  # fmt: skip
        runner = [sys.executable, str(ROOT / "bench" / "traced.py"), prefix, str(args.frames)]
        with component(argv, log, runner=runner) as pid:
            held = hold(api, JOB, ns, bodies, pending_kind=QUEUE_UNIT, pending=unit_pending,
                        pid=pid, clients=args.clients, timeout_s=1800)  # fmt: skip
            before = {"rss_mb": rss_mb(pid), "peak_rss_mb": rss_mb(pid, "VmHWM")}
            samples = {k.kind: api.list_objects(k, ns)[0] for k in (QUEUE_UNIT, JOB)}
            Path(f"{prefix}.objects.json").write_text(json.dumps(samples, indent=1))
            os.kill(pid, signal.SIGUSR1)
            deadline = time.time() + 600
            while not Path(f"{prefix}.done").exists() and time.time() < deadline:
                time.sleep(0.5)
    census: dict[str, Any] = json.loads(Path(f"{prefix}.census.json").read_text())
    print(f"held: {vars(held)}; before the census {before}")
    print("gc-tracked objects by type (count, shallow MB):")
    for name, count, size in census["by_type"]:
        print(f"  {name:30s} {count:9d} {size / 1e6:8.1f}")
    result: dict[str, Any] = {"memory": args.depth, "quotas": args.quotas,
                              "frames": args.frames, **before, "held": vars(held)}  # fmt: skip
    if args.frames:
        tops = top_allocations(f"{prefix}.snapshot", args.top)
        for section, lines in tops.items():
            print(f"{section}:")
            for line in lines:
                print("  " + line)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
