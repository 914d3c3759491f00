"""CPU per API request: KubeApi through libcurl (curl_transport.py) against urllib3's pool
(transport.py), on the test control plane (issue 36: a controller's CPU per admission is
mostly its four API calls per Job).

Each run sends `--requests` merge patches of one ConfigMap from one thread through each
transport in turn (interleaved, `--runs` times) and reads this process's CPU time around them:
what the client spends per request, the API server's work excluded (another process).
Prints microseconds per request, each run's ratio, and the medians.

    python bench/bench_transport.py --requests 1500 --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from koordqueue.kube.api import Kind, KubeApi, load_api_client  # noqa: E402
from koordqueue.kube.curl_transport import CurlTransport  # noqa: E402
from koordqueue.kube.transport import Transport  # noqa: E402
from tests.controlplane.harness import ControlPlane  # noqa: E402

CONFIG_MAP = Kind("", "v1", "configmaps", "ConfigMap")
TRANSPORTS = {"curl": CurlTransport, "urllib3": Transport}


def cpu_per_request(api: KubeApi, requests: int) -> tuple[float, float]:
    """(CPU, wall) microseconds per merge patch, after a warm-up on the same connection."""
    for i in range(20):
        api.merge_patch(CONFIG_MAP, "bench", {"data": {"n": str(i)}}, "default")
    cpu, wall = time.process_time(), time.monotonic()
    for i in range(requests):
        api.merge_patch(CONFIG_MAP, "bench", {"data": {"n": str(i)}}, "default")
    return (1e6 * (time.process_time() - cpu) / requests,
            1e6 * (time.monotonic() - wall) / requests)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[float]] = {name: [] for name in TRANSPORTS}
    with ControlPlane() as plane:
        client = load_api_client(str(plane.kubeconfig))
        KubeApi(client).create(CONFIG_MAP, {"metadata": {"name": "bench"}}, "default")
        for run in range(1, args.runs + 1):
            row = []
            for name, transport in TRANSPORTS.items():
                api = KubeApi(client)
                api._transport = transport(client, api.timeout)
                cpu, wall = cpu_per_request(api, args.requests)
                results[name].append(cpu)
                row.append(f"{name} {cpu:.0f} us CPU ({wall:.0f} us wall)")
            ratio = results["curl"][-1] / results["urllib3"][-1]
            print(f"run {run}: " + ", ".join(row) + f"; curl/urllib3 {ratio:.2f}x", flush=True)
    curl, urllib3 = (statistics.median(results[n]) for n in ("curl", "urllib3"))
    print(f"median CPU per request: curl {curl:.0f} us, urllib3 {urllib3:.0f} us, "
          f"ratio {curl / urllib3:.2f}x ({args.requests} merge patches x {args.runs} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
