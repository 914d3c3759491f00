"""`koordqueue explain pod/NAME` for a pod numa-aware refuses: the message (the text of the
pod's FailedScheduling event) and the per-node rows name numa-aware and say why. Fails with
the Numatopologies not read into the cache (the pod then has no NUMA information anywhere:
"numa info is empty" instead of the container's refusal)."""

from __future__ import annotations

from typing import Any

from koordqueue.kube.scheduler.cache import CachedKind
from koordqueue.kube.scheduler.explain_pod import PodVerdict, explain_pod
from koordqueue.scheduler import parse_config
from koordqueue.scheduler.api import numa_names as nn
from tests.unit.cli.test_explain_pod import cache_of, node, pod
from tests.unit.kube.test_cache_numatopology import numatopo

CONFIG = parse_config(
    """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: numa-aware
"""
)


def _guaranteed(name: str) -> dict[str, Any]:
    target = pod(name, cpu="4", annotations={nn.NUMA_POLICY_KEY: "single-numa-node"})
    resources = target["spec"]["containers"][0]["resources"]
    resources["limits"] = dict(resources["requests"])
    return target


def _explain(with_topologies: bool) -> Any:
    target = _guaranteed("p")
    cache = cache_of([node("n1", "16"), node("n2", "16")], [target])
    if with_topologies:
        cache.replace(CachedKind.NUMATOPOLOGY, [numatopo("n1", "1-3,5-7"), numatopo("n2", "1-3")])
    return explain_pod(target, cache, CONFIG)


def test_a_pod_no_numa_node_fits_is_explained_naming_numa_aware() -> None:
    ex = _explain(True)
    assert ex.verdict is not PodVerdict.WOULD_BIND
    assert "numa-aware: container c cannot be assigned by numa" in (ex.message or "")
    rows = {n.node: " ".join(n.reasons) for n in ex.nodes}
    assert "numa-aware" in rows["n1"] and "numa-aware" in rows["n2"]


def test_without_the_numatopologies_the_reason_is_that_there_are_none() -> None:
    ex = _explain(False)
    assert "numa-aware: numa info is empty" in (ex.message or "")
    assert "cannot be assigned by numa" not in (ex.message or "")
