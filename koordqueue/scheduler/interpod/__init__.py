"""Inter-pod affinity and topology spread: kube-scheduler's InterPodAffinity and
PodTopologySpread over per-session pod counts (their PreFilter/PreScore state, kept
incrementally). A library, not a plugin: the predicates and nodeorder plugins and the
preempt action use it. `counts` (the pod counts), `affinity`, `spread`.

Why a shared, incremental state: kube-scheduler rebuilds these counts for every pod in
PreFilter (a walk over all pods); here each distinct pod filter (a term, all required
terms of a pod, or a spread selector) keeps a per-node count of the pods it selects, built
once from a label index and moved by the session's allocate/deallocate events, together
with its sums per topology domain for each topology key asked about (one scalar update per
key and event). A query is then a few O(nodes) numpy operations, mostly one gather of a
per-domain verdict onto the nodes. Pods that use none of the features cost one attribute
check.

Counted pods are those placed on a node (Bound, Binding, Running, Allocated, Pipelined,
Releasing). As in Volcano, a pod the session evicts or un-allocates stops counting; a pod
already terminating when the session opens counts for inter-pod affinity but not for
spreading (kube-scheduler skips terminating pods there).
"""

from koordqueue.scheduler.interpod.affinity import InterPodAffinity
from koordqueue.scheduler.interpod.counts import (
    PodCounts,
    plugin_enabled,
    pod_counts,
    preemption_candidates,
    timed,
)
from koordqueue.scheduler.interpod.names import (
    ERR_AFFINITY_RULES,
    ERR_ANTI_AFFINITY_RULES,
    ERR_EXISTING_ANTI_AFFINITY,
    ERR_SPREAD,
    ERR_SPREAD_LABEL,
    HARD_POD_AFFINITY_WEIGHT,
    HOSTNAME_KEY,
    INTER_POD_AFFINITY,
    MAX_NODE_SCORE,
    NODE_AFFINITY_TAINTS,
    POD_TOPOLOGY_SPREAD,
)
from koordqueue.scheduler.interpod.spread import PodTopologySpread, included_nodes

__all__ = [
    "ERR_AFFINITY_RULES",
    "ERR_ANTI_AFFINITY_RULES",
    "ERR_EXISTING_ANTI_AFFINITY",
    "ERR_SPREAD",
    "ERR_SPREAD_LABEL",
    "HARD_POD_AFFINITY_WEIGHT",
    "HOSTNAME_KEY",
    "INTER_POD_AFFINITY",
    "MAX_NODE_SCORE",
    "NODE_AFFINITY_TAINTS",
    "POD_TOPOLOGY_SPREAD",
    "InterPodAffinity",
    "PodCounts",
    "PodTopologySpread",
    "included_nodes",
    "plugin_enabled",
    "pod_counts",
    "preemption_candidates",
    "timed",
]
