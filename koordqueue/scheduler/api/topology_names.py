"""Names of the network topology features: the network-topology-aware plugin's arguments,
the gang actions' arguments, and the reasons allocate and preempt give when a topology
refuses a job (one source for the session's record, events and `explain`)."""

from __future__ import annotations

from typing import Final

# --- network-topology-aware arguments (Volcano's keys) ------------------------------------
WEIGHT: Final = "weight"
BINPACK_CPU: Final = "hypernode.binpack.cpu"
BINPACK_MEMORY: Final = "hypernode.binpack.memory"
BINPACK_RESOURCES: Final = "hypernode.binpack.resources"
NORMAL_POD_ENABLE: Final = "hypernode.binpack.normal-pod.enable"
NORMAL_POD_FADING: Final = "hypernode.binpack.normal-pod.fading"
EVICT_MAX_HYPERNODES: Final = "hypernode.gradient.evict.max-hypernodes"

# --- action arguments (`configurations:`) ---------------------------------------------------
MAX_DOMAINS: Final = "maxDomains"
ALLOW_WHOLE_BUNDLE: Final = "allowWholeBundle"
ENABLE_TOPOLOGY_AWARE_PREEMPTION: Final = "enableTopologyAwarePreemption"
MIN_CANDIDATE_NODES_PERCENTAGE: Final = "minCandidateNodesPercentage"
MIN_CANDIDATE_NODES_ABSOLUTE: Final = "minCandidateNodesAbsolute"
MAX_CANDIDATE_NODES_ABSOLUTE: Final = "maxCandidateNodesAbsolute"
TOPOLOGY_AWARE_PREEMPT_WORKER_NUM: Final = "topologyAwarePreemptWorkerNum"

# --- refusals: why a job with a networkTopology was not placed -----------------------------
NOT_READY: Final = "hyperNodes are not ready for scheduling: {errors}"
"""Allocate skips a job with a networkTopology while the HyperNode tree has a cycle or a
HyperNode with two parents (Volcano waits too). The refusals below are recorded after
"network-topology-aware: "."""
TIER_TOO_HIGH: Final = (
    "the job already spans hyperNode {hypernode} (tier {tier}), above its highestTierAllowed"
    " {allowed}"
)
NO_HYPERNODE: Final = "no hyperNode of tier <= {allowed} has room for the job's minResources"
NO_HYPERNODE_FITS: Final = "the job fits in no hyperNode of tier <= {allowed} (tried {tried})"
UNKNOWN_TIER_NAME: Final = (
    "network-topology-aware: highestTierName {name!r} names no HyperNode tier; the job is"
    " placed as if it had no hard topology"
)
IN_HYPERNODE: Final = "In hyperNode {hypernode}: {message}"
"""A task's fit errors within one HyperNode (Volcano's FitErrors.SetHyperNode)."""

# --- eviction reasons ---------------------------------------------------------------------
EVICT_GANG_PREEMPT: Final = "gangpreempt"
EVICT_GANG_RECLAIM: Final = "gangreclaim"
EVICT_SHUFFLE: Final = "shuffle"
