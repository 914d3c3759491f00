"""The placement floor (issue 28 part 3): bind each pod to a fixed node as it is created.

    python bench/binder.py --kubeconfig K --namespace bench [--scheduler-name volcano]
                           [--workers 8]

Decides nothing: it watches the namespace's pods (bench/burst.py's raw watch, no informer, no
cache), and each pending pod of `--scheduler-name` without a node goes to a worker that POSTs
its pods/binding to the node the pod's name hashes to among the Nodes listed at start. Its
create -> bind p99 and the API server's CPU in bench_peers.py's placement runs are what this
API server on this box costs with no scheduling at all; koordqueue's and kube-scheduler's
figures are reported as multiples of them.
"""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.burst import watch_objects
from koordqueue.kube.api import POD, Kind, KubeApi, load_api_client

NODE = Kind("", "v1", "nodes", "Node", False)


def node_for(pod_name: str, nodes: list[str]) -> str:
    """A fixed node per pod: stable across runs, spread evenly, no state."""
    return nodes[zlib.crc32(pod_name.encode()) % len(nodes)]


def wants_binding(pod: dict[str, Any], scheduler_name: str) -> bool:
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (
        spec.get("schedulerName") == scheduler_name
        and not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
    )


def binding(pod: dict[str, Any], node: str) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--scheduler-name", default="volcano")
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args(argv)
    api = KubeApi(load_api_client(args.kubeconfig))
    nodes = sorted(n["metadata"]["name"] for n in api.list_objects(NODE))
    if not nodes:
        print("binder: no Node objects", file=sys.stderr)
        return 2
    work: queue.Queue[dict[str, Any]] = queue.Queue()
    seen: set[str] = set()

    def on_event(kind: str, obj: dict[str, Any], _at: float) -> None:
        uid = (obj.get("metadata") or {}).get("uid", "")
        if kind in ("ADDED", "MODIFIED") and uid not in seen and wants_binding(
            obj, args.scheduler_name
        ):
            seen.add(uid)
            work.put(obj)

    def worker() -> None:
        while True:
            pod = work.get()
            meta = pod["metadata"]
            body = binding(pod, node_for(meta["name"], nodes))
            try:
                api.request("POST", POD.path(meta["namespace"], meta["name"], "binding"),
                            body=body)
            except Exception as exc:  # a bench tool: report and go on
                print(f"binder: {meta['name']}: {exc}", file=sys.stderr)

    for _ in range(args.workers):
        threading.Thread(target=worker, daemon=True).start()
    print(f"binder: {len(nodes)} nodes, watching {args.namespace}", flush=True)
    watch_objects(api, POD, args.namespace, on_event, done=lambda: False,
                  deadline=time.time() + 24 * 3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
