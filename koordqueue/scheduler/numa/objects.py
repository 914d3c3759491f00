"""numa-aware's inputs read off API objects (the kube adapter's and scenario files'): a node's
Numatopology (nodeinfo.volcano.sh/v1alpha1, Volcano's own CRD, named after its node) and a
pod's QoS class, policy annotation and per-container cpu requests.

A Numatopology field this code cannot read (a cpuset that does not parse, a cpu id that is
not a number, a reservation that is not a quantity) drops that field with one warning naming
the object, as Volcano's cache logs and skips it; the rest of the object is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import structlog

from koordqueue.domain.quantity import MILLI_NANO, InvalidQuantityError, ceil_div, parse_nanos
from koordqueue.scheduler.api import numa_names as nn
from koordqueue.scheduler.api.numa import (
    ContainerCpus,
    CpuInfo,
    NumaResource,
    NumaTopology,
    TaskNuma,
    parse_cpuset,
)

log = structlog.get_logger(__name__)
Obj = Mapping[str, Any]
_QOS_RESOURCES = ("cpu", "memory")


def _nanos(value: object) -> int | None:
    try:
        return parse_nanos(value)
    except (InvalidQuantityError, TypeError, ValueError):
        return None


def _warn(name: str, detail: str) -> None:
    log.warning(nn.BAD_TOPOLOGY_WARNING.format(name=name, detail=detail))


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def numatopology(raw: Obj) -> NumaTopology:
    """One Numatopology object as the core's data (unreadable fields dropped, logged)."""
    name = str((raw.get("metadata") or {}).get("name", ""))
    spec = raw.get("spec") or {}
    policies = {str(k): str(v) for k, v in (spec.get("policies") or {}).items()}
    resources: dict[str, NumaResource] = {}
    for res, raw_info in (spec.get("numares") or {}).items():
        info = raw_info if isinstance(raw_info, Mapping) else {}
        try:
            cpus = parse_cpuset(str(info.get("allocatable") or ""))
        except ValueError:
            _warn(name, f"numares.{res}.allocatable {info.get('allocatable')!r} is not a cpuset")
            cpus = frozenset()
        resources[str(res)] = NumaResource(cpus, _int(info.get("capacity")))
    cpus_detail: dict[int, CpuInfo] = {}
    for key, raw_detail in (spec.get("cpuDetail") or {}).items():
        try:
            cpu = int(key)
        except ValueError:
            _warn(name, f"cpuDetail key {key!r} is not a cpu id")
            continue
        detail = raw_detail if isinstance(raw_detail, Mapping) else {}
        cpus_detail[cpu] = CpuInfo(
            _int(detail.get("numa")), _int(detail.get("socket")), _int(detail.get("core"))
        )
    reserved: int | None = None
    raw_reserved = (spec.get("resReserved") or {}).get(nn.CPU)
    if raw_reserved is not None:
        nanos = _nanos(raw_reserved)
        if nanos is None:
            _warn(name, f"resReserved.cpu {raw_reserved!r} is not a quantity")
        else:
            reserved = ceil_div(nanos, MILLI_NANO)
    return NumaTopology(name, policies, resources, cpus_detail, reserved)


def numatopologies(raws: Iterable[Obj]) -> dict[str, NumaTopology]:
    """Every Numatopology by name (its node's), in name order."""
    out = (numatopology(raw) for raw in raws)
    return {t.name: t for t in sorted(out, key=lambda t: t.name)}


def _amounts(raw: object) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, int] = {}
    for name in _QOS_RESOURCES:
        if name in raw:
            nanos = _nanos(raw[name])
            if nanos:
                out[name] = nanos
    return out


def guaranteed(spec: Obj) -> bool:
    """The pod's QoS class is Guaranteed (the kubelet's GetPodQOS): every container limits
    cpu and memory, and the summed requests equal the summed limits."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    ok = True
    for c in containers:
        resources = c.get("resources") if isinstance(c, Mapping) else None
        resources = resources if isinstance(resources, Mapping) else {}
        req = _amounts(resources.get("requests"))
        lim = _amounts(resources.get("limits"))
        for k, v in req.items():
            requests[k] = requests.get(k, 0) + v
        for k, v in lim.items():
            limits[k] = limits.get(k, 0) + v
        if set(lim) != set(_QOS_RESOURCES):
            ok = False
    if not requests and not limits:
        return False
    return ok and requests == limits


def task_numa(pod: Obj) -> TaskNuma | None:
    """A Guaranteed pod's policy annotation and container cpus; None for other pods."""
    spec = pod.get("spec") or {}
    if not guaranteed(spec):
        return None
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    containers = []
    for c in spec.get("containers") or ():
        requests = ((c.get("resources") or {}).get("requests") or {})
        nanos = _nanos(requests["cpu"]) if "cpu" in requests else None
        millis = None if nanos is None else ceil_div(nanos, MILLI_NANO)
        containers.append(ContainerCpus(str(c.get("name", "")), millis))
    return TaskNuma(str(annotations.get(nn.NUMA_POLICY_KEY, "")), tuple(containers))


def numa_policy(meta: Obj) -> str | None:
    """The policy annotation of a pod's metadata (None without)."""
    value = (meta.get("annotations") or {}).get(nn.NUMA_POLICY_KEY)
    return None if value is None else str(value)


__all__ = ["Obj", "guaranteed", "numa_policy", "numatopologies", "numatopology", "task_numa"]
