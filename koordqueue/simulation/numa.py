"""numa-aware in scenarios: a node's `numatopology` (a Numatopology's spec, as Volcano's
exporter writes it) and a unit whose `volcano.sh/numa-topology-policy` annotation makes its
pods Guaranteed, one container each with the pod's cpus. The cpus numa-aware gives a pod
stay taken while the pod is placed (the simulator is the exporter here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordqueue.scheduler.api import numa_names as nn
from koordqueue.scheduler.api.numa import (
    Assigned,
    ContainerCpus,
    CpuSet,
    NumaTopology,
    TaskNuma,
    by_node,
)
from koordqueue.scheduler.numa.objects import numatopology

_NANOS_PER_MILLI = 10**6
CONTAINER = "main"


def task_numa(annotations: Mapping[str, str], cpu_nanos: int) -> TaskNuma | None:
    """The pod's NUMA request when its unit names a policy (None: numa-aware ignores it)."""
    policy = annotations.get(nn.NUMA_POLICY_KEY)
    if policy is None:
        return None
    millis = -(-cpu_nanos // _NANOS_PER_MILLI)
    return TaskNuma(policy, (ContainerCpus(CONTAINER, millis or None),))


def topologies(
    nodes: Mapping[str, Mapping[str, Any] | None], given: Assigned
) -> dict[str, NumaTopology]:
    """Each node's Numatopology (from its spec) less the cpus pods placed there hold."""
    taken: dict[str, dict[str, CpuSet]] = by_node(given)
    out: dict[str, NumaTopology] = {}
    for name, spec in sorted(nodes.items()):
        if spec is None:
            continue
        topo = numatopology({"metadata": {"name": name}, "spec": spec})
        out[name] = topo.with_allocated(taken.get(name, {}))
    return out


__all__ = ["CONTAINER", "task_numa", "topologies"]
