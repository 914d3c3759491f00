"""Benchmark: what deviceshare costs a session (issue 34 part 3).

Usage: python bench/bench_deviceshare.py [--quick]

The default plugins place gang jobs of 10 device-free pods on nodes of which 10 % report
gpushare GPUs (capacity `volcano.sh/gpu-memory`, `volcano.sh/gpu-number`); the same session
runs with deviceshare added (`deviceshare.GPUSharingEnable: true`). Device-free pods should
pay nothing measurable (the device predicate and score answer None for them): the ratio is
printed. A third run adds 10 % GPU-sharing pods, the cost of the per-node device math they
do need. Best of 5 (3 with --quick) process CPU seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, SchedulerConfig, default_config, run_session
from koordqueue.scheduler.api import JobInfo, NodeInfo, PodGroupPhase, QueueInfo, TaskInfo
from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.api.devices import ContainerDevices, NodeDeviceSource, PodDevices
from koordqueue.scheduler.framework import Arguments, PluginOption, Tier


def cluster(nodes: int, jobs: int, gpu_share: float) -> ClusterSnapshot:
    node_list = []
    for i in range(nodes):
        amounts = {"cpu": "32", "memory": "128Gi", "pods": "110"}
        devices = None
        if i % 10 == 0:
            amounts |= {dn.GPU_MEMORY: "64000", dn.GPU_NUMBER: "4"}
            devices = NodeDeviceSource(gpu_memory=64000, gpu_number=4)
        node_list.append(NodeInfo(f"n{i:05d}", Resources.of(amounts), devices=devices))
    plain = Resources.of({"cpu": "1", "memory": "1Gi"})
    gpu = Resources.of({"cpu": "1", "memory": "1Gi", dn.GPU_MEMORY: "6000"})
    gpu_devices = PodDevices((ContainerDevices({dn.GPU_MEMORY: 6000}),))
    job_list = []
    gpu_every = int(1 / gpu_share) if gpu_share else 0
    for j in range(jobs):
        with_gpu = bool(gpu_every) and j % gpu_every == 0
        tasks = [
            TaskInfo(f"j{j}-t{t}", f"j{j}-t{t}", "bench", f"j{j}",
                     resreq=gpu if with_gpu else plain,
                     devices=gpu_devices if with_gpu else None)
            for t in range(10)
        ]
        job_list.append(JobInfo(f"j{j}", namespace="bench", queue="q", min_available=10,
                                phase=PodGroupPhase.INQUEUE, creation=float(j), tasks=tasks))
    return ClusterSnapshot(node_list, job_list, [QueueInfo("q", weight=1)])


def with_deviceshare(conf: SchedulerConfig) -> SchedulerConfig:
    option = PluginOption(dn.PLUGIN_NAME, Arguments({dn.GPU_SHARING_ENABLE: True}))
    last = conf.tiers[-1]
    return dataclasses.replace(
        conf, tiers=(*conf.tiers[:-1], Tier((*last.plugins, option))))


def best(snapshot: ClusterSnapshot, conf: SchedulerConfig, runs: int) -> tuple[float, int]:
    times, bound = [], 0
    for _ in range(runs):
        start = time.process_time()
        result = run_session(snapshot, conf)
        times.append(time.process_time() - start)
        bound = len(result.binds)
    return min(times), bound


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    nodes, jobs, runs = (1000, 200, 3) if args.quick else (5000, 1000, 5)
    base = default_config()
    plus = with_deviceshare(base)
    free = cluster(nodes, jobs, 0.0)
    without, bound_a = best(free, base, runs)
    with_ds, bound_b = best(free, plus, runs)
    assert bound_a == bound_b == jobs * 10
    print(f"{jobs * 10} device-free pods on {nodes} nodes (10 % with GPUs):")
    print(f"  default plugins          {without:.3f} s CPU")
    print(f"  + deviceshare            {with_ds:.3f} s CPU   ratio {with_ds / without:.3f}")
    mixed = cluster(nodes, jobs, 0.1)
    gpu_time, bound_c = best(mixed, plus, runs)
    print(f"  10 % GPU-sharing pods    {gpu_time:.3f} s CPU   ({bound_c} bound)")


if __name__ == "__main__":
    main()
