"""Volcano's spellings for resource-strategy-fit (v1.14.1): the plugin, its arguments, the pod
annotations, the scoring types, and the proportional refusal (naming the plugin, for explain)."""

from __future__ import annotations

from typing import Final

PLUGIN_NAME: Final = "resource-strategy-fit"
WEIGHT: Final = "resourceStrategyFitWeight"
DEFAULT_WEIGHT: Final = 10
RESOURCES: Final = "resources"
SRA: Final = "sra"
PROPORTIONAL: Final = "proportional"
MOST_ALLOCATED: Final = "MostAllocated"
LEAST_ALLOCATED: Final = "LeastAllocated"
MAX_NODE_SCORE: Final = 100

SCORING_TYPE_KEY: Final = "volcano.sh/resource-strategy-scoring-type"
"""Pod annotation: MostAllocated or LeastAllocated for this pod, over the conf's resources."""
SCORING_WEIGHT_KEY: Final = "volcano.sh/resource-strategy-weight"
"""Pod annotation: a JSON map resource -> weight, the resources the pod's own type scores."""

PROPORTION_REFUSED: Final = PLUGIN_NAME + ": proportional of resource {resource} check failed"
BAD_ARGUMENT_WARNING: Final = PLUGIN_NAME + ": argument {key} {detail}; {action}"
