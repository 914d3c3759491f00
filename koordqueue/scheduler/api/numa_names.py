"""Volcano's spellings for numa-aware (v1.14.1): the plugin, its argument, the pod annotation,
the Numatopology CRD's policy keys and values, and the refusals (each names the plugin, for
explain)."""

from __future__ import annotations

from typing import Final

PLUGIN_NAME: Final = "numa-aware"
WEIGHT: Final = "weight"
"""The plugin's one argument: its score's weight (default 1)."""
NUMA_POLICY_KEY: Final = "volcano.sh/numa-topology-policy"
"""Pod annotation (a vcjob's `topologyPolicy` lands here): the topology policy it asks for."""

NUMATOPOLOGY_GROUP: Final = "nodeinfo.volcano.sh"
NUMATOPOLOGY_VERSION: Final = "v1alpha1"
NUMATOPOLOGY_PLURAL: Final = "numatopologies"

CPU_MANAGER_POLICY: Final = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY: Final = "TopologyManagerPolicy"
CPU_MANAGER_STATIC: Final = "static"
POLICY_NONE: Final = "none"
POLICY_BEST_EFFORT: Final = "best-effort"
POLICY_RESTRICTED: Final = "restricted"
POLICY_SINGLE_NUMA_NODE: Final = "single-numa-node"
CPU: Final = "cpu"
MAX_NODE_SCORE: Final = 100

# --- refusals: Volcano's messages, prefixed with the plugin's name -----------------------------
_PREFIX: Final = PLUGIN_NAME + ": "
NO_NUMA_INFO: Final = _PREFIX + "numa info is empty (no Numatopology for the node)"
NOT_STATIC: Final = _PREFIX + "cpu manager policy isn't static"
POLICY_DIFFERS: Final = _PREFIX + "task topology policy[{task}] is different with node[{node}]"
NO_TOPO_INFO: Final = _PREFIX + "no topo information"
NO_ALLOCATABLE_CPUS: Final = _PREFIX + "cpu allocatable map is empty"
NO_NUMA_NODE_FITS: Final = (
    _PREFIX + "container {container} cannot be assigned by numa (no NUMA node fits its "
    "{cpus} cpus under {policy})"
)
BAD_TOPOLOGY_WARNING: Final = "Numatopology {name}: {detail}; ignored"
