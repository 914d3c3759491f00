"""Constants of the inter-pod placement features: kube-scheduler's messages and defaults."""

from __future__ import annotations

from typing import Final

HOSTNAME_KEY: Final = "kubernetes.io/hostname"
MAX_NODE_SCORE: Final = 100
HARD_POD_AFFINITY_WEIGHT: Final = 1
"""kube-scheduler's InterPodAffinityArgs.hardPodAffinityWeight default."""

ERR_AFFINITY_RULES: Final = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY_RULES: Final = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_SPREAD_LABEL: Final = (
    "node(s) didn't match pod topology spread constraints (missing required label)"
)
ERR_SPREAD: Final = "node(s) didn't match pod topology spread constraints"

INTER_POD_AFFINITY: Final = "interpodaffinity"
POD_TOPOLOGY_SPREAD: Final = "podtopologyspread"
NODE_AFFINITY_TAINTS: Final = "nodeaffinity+tainttoleration"
"""Names the placement features' callback time is reported under (profiled sessions); the
counts' allocate/deallocate bookkeeping is reported under predicates."""
